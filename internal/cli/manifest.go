package cli

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ManifestVersion is the version of docs/commands.json's own shape.
const ManifestVersion = 1

// A CommandManifest describes the command line to the client generators
// (npm/scripts/gen-types.mjs writes the TypeScript and Python stubs from
// it): every command's path, flags, positional arguments and the schema of
// its --json output. It is dumped from the cobra tree, so it cannot drift.
type CommandManifest struct {
	ManifestVersion int `json:"manifest_version"`
	// GlobalFlags are the root's persistent flags, valid on every command.
	GlobalFlags []ManifestFlag    `json:"global_flags"`
	Commands    []ManifestCommand `json:"commands"`
}

// A ManifestCommand is one runnable command.
type ManifestCommand struct {
	// Path is the words after "avfs", e.g. ["vault", "create"].
	Path  []string `json:"path"`
	Short string   `json:"short"`
	Use   string   `json:"use"`
	// Schema is the file under docs/schema/ its --json output follows
	// ("" when it prints no document); errors follow error.json.
	Schema string `json:"schema"`
	// VaultScoped commands work on the vault --vault (or the current one) selects.
	VaultScoped bool           `json:"vault_scoped"`
	Args        []ManifestArg  `json:"args"`
	Flags       []ManifestFlag `json:"flags"`
}

// A ManifestArg is a positional argument, parsed from the command's Use line.
type ManifestArg struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional"`
	// Variadic takes every remaining argument (at least one unless Optional).
	Variadic bool `json:"variadic"`
}

// A ManifestFlag is one flag.
type ManifestFlag struct {
	Name string `json:"name"`
	// Type is pflag's: bool, string, int, int64, duration, stringArray, ...
	Type    string `json:"type"`
	Default string `json:"default"`
	// Repeatable flags may be given more than once, each adding a value.
	Repeatable bool   `json:"repeatable"`
	Usage      string `json:"usage"`
}

// notVaultScoped are the commands that never act on the selected vault
// (they name vaults as arguments, or none), so clients pass no --vault.
var notVaultScoped = map[string]bool{
	"avfs vault create": true, "avfs vault list": true, "avfs vault fork": true,
	"avfs vault delete": true, "avfs vault use": true, "avfs vault merge": true,
	"avfs version": true, "avfs completion": true, "avfs help": true, "avfs mcp": true,
	"avfs unmount": true, "avfs mounts": true,
	"avfs proxy approve": true, "avfs proxy reject": true,
}

// Manifest returns docs/commands.json: the manifest of the command tree.
func Manifest() ([]byte, error) {
	root := NewCommand()
	m := CommandManifest{ManifestVersion: ManifestVersion, GlobalFlags: flagsOf(root.PersistentFlags())}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			// help is for people: `avfs help CMD` is `avfs CMD --help`.
			if sub.Hidden || !sub.IsAvailableCommand() {
				continue
			}
			path := sub.CommandPath()
			// A group that only prints its help is no command of its own.
			if _, ok := Schemas[path]; sub.Runnable() && (ok || !sub.HasAvailableSubCommands()) {
				m.Commands = append(m.Commands, ManifestCommand{
					Path:        strings.Fields(path)[1:],
					Short:       sub.Short,
					Use:         sub.UseLine(),
					Schema:      Schemas[path],
					VaultScoped: !notVaultScoped[path],
					Args:        argsOf(sub.Use),
					Flags:       flagsOf(sub.LocalNonPersistentFlags()),
				})
			}
			walk(sub)
		}
	}
	walk(root)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func flagsOf(fs *pflag.FlagSet) []ManifestFlag {
	out := []ManifestFlag{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		t := f.Value.Type()
		out = append(out, ManifestFlag{
			Name: f.Name, Type: t, Default: defaultOf(f),
			Repeatable: strings.HasSuffix(t, "Array") || strings.HasSuffix(t, "Slice"),
			Usage:      f.Usage,
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// defaultOf is the default as the flag would print it; a repeatable
// flag's empty "[]" is "".
func defaultOf(f *pflag.Flag) string {
	if f.DefValue == "[]" {
		return ""
	}
	return f.DefValue
}

var argWord = regexp.MustCompile(`^[A-Z][A-Z_]*(\.\.\.)?$`)

// argsOf reads the positional arguments from a Use line such as
// "diff [FROM [TO]]", "mount [VAULT] MOUNTPOINT" or
// "exec [flags] (--shell SCRIPT | -- ARGV...)": upper-case words are
// arguments, those inside [ ] or ( | ) optional, "..." variadic, and a word
// right after a --flag is that flag's value.
func argsOf(use string) []ManifestArg {
	use = strings.NewReplacer("[", " [ ", "]", " ] ", "(", " ( ", ")", " ) ", "|", " | ").Replace(use)
	words := strings.Fields(use)[1:]
	out := []ManifestArg{}
	depth := 0
	for i, w := range words {
		switch {
		case w == "[" || w == "(":
			depth++
		case w == "]" || w == ")":
			depth--
		case argWord.MatchString(w):
			if i > 0 && strings.HasPrefix(words[i-1], "-") && words[i-1] != "--" {
				continue // a flag's value, e.g. --shell SCRIPT
			}
			out = append(out, ManifestArg{
				Name:     strings.TrimSuffix(w, "..."),
				Optional: depth > 0,
				Variadic: strings.HasSuffix(w, "..."),
			})
		}
	}
	return out
}
