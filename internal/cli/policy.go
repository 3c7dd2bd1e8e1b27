package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

func (a *app) policyCmd() *cobra.Command {
	return a.group("policy", "Show the proxy's policy and check commands against it",
		a.policyShowCmd(), a.policyCheckCmd())
}

// policyVault is the vault whose policy file applies: the selected vault,
// or none when nothing is selected (the home's policy alone).
// loadPolicy loads the effective policy of the selected vault ("" when none).
func (a *app) loadPolicy() (string, *policy.Policy, error) {
	h, err := a.home()
	if err != nil {
		return "", nil, err
	}
	vault, err := a.policyVault(h)
	if err != nil {
		return "", nil, err
	}
	p, err := policy.Load(h.Dir, vault)
	return vault, p, err
}

func (a *app) policyVault(h *registry.Home) (string, error) {
	name, err := a.vaultName(h)
	if errs.Is(err, errs.NoActiveVault) {
		return "", nil
	}
	return name, err
}

// policyResult is the JSON of policy show.
type policyResult struct {
	SchemaVersion int     `json:"schema_version"`
	Kind          string  `json:"kind"`
	Vault         *string `json:"vault"`
	*policy.Policy
}

func (r policyResult) human(w io.Writer) {
	if len(r.Sources) == 0 {
		fmt.Fprintln(w, "policy files: none (the default rules)")
	}
	for _, s := range r.Sources {
		fmt.Fprintf(w, "policy file: %s\n", s)
	}
	fmt.Fprintln(w, "categories:")
	for _, c := range policy.Categories {
		fmt.Fprintf(w, "  %-18s %s\n", c, r.Actions[c])
	}
	for _, set := range [][]policy.Rule{r.Rules, r.VaultRules} {
		for _, rule := range set {
			fmt.Fprintf(w, "rule %s: program %v args %v categories %v → %s\n", rule.ID, rule.Program, rule.Args, rule.Categories, rule.Action)
		}
	}
	fmt.Fprintf(w, "sandbox: hide %v read_only %v writable %v\n", r.Sandbox.Hide, r.Sandbox.ReadOnly, r.Sandbox.Writable)
}

func (a *app) policyShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the effective policy: default categories, policy.toml and the vault's file",
		Long: `Print the policy proxy exec applies to the selected vault: the action of each
category after $AVFS_HOME/policy.toml, and the ordered rules of that file and
of $AVFS_HOME/policies/<vault>.toml (which can only tighten). An invalid file
is refused with the line at fault.`,
		Args: noArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			vault, p, err := a.loadPolicy()
			if err != nil {
				return nil, err
			}
			r := policyResult{SchemaVersion: 1, Kind: "policy", Policy: p}
			if vault != "" {
				r.Vault = &vault
			}
			return r, nil
		}),
	}
}

// checkResult is the JSON of policy check.
type checkResult struct {
	SchemaVersion int             `json:"schema_version"`
	Kind          string          `json:"kind"`
	Vault         *string         `json:"vault"`
	Request       policy.Request  `json:"request"`
	Decision      policy.Decision `json:"decision"`
	// Isolation is the boundary proxy exec would run the command in
	// (unapproved; null without a vault, whose mount it depends on).
	Isolation *sandbox.Isolation `json:"isolation"`
}

func (r checkResult) human(w io.Writer) {
	d := r.Decision
	fmt.Fprintf(w, "%s (%s): %s\n", d.Action, d.Rule, d.Reason)
	for _, c := range d.Commands {
		dyn := ""
		if c.Dynamic {
			dyn = " (a word known only at run time)"
		}
		fmt.Fprintf(w, "  %-22s %-22s %s [%s]%s\n", c.Program, c.Action, c.Reason, strings.Join(c.Categories, ","), dyn)
	}
	if i := r.Isolation; i != nil {
		fmt.Fprintf(w, "isolation: %s, network %s: %s\n", i.Mode, i.Network, i.Reason)
		if len(i.Hidden) > 0 {
			fmt.Fprintf(w, "  hidden: %s\n", strings.Join(i.Hidden, " "))
		}
	}
}

func (a *app) policyCheckCmd() *cobra.Command {
	var shell, cwd, isolate string
	var env []string
	c := &cobra.Command{
		Use:   "check [--shell SCRIPT | -- ARGV...]",
		Short: "Print the policy's decision for a command, without running anything",
		Args:  cobra.ArbitraryArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if (len(args) == 0) == (shell == "") {
				return nil, usageErrorf("give --shell SCRIPT or an argv after --")
			}
			vault, p, err := a.loadPolicy()
			if err != nil {
				return nil, err
			}
			req := policy.Request{Argv: slices.Clone(args), Shell: shell, Cwd: cwd, Env: env}
			r := checkResult{SchemaVersion: 1, Kind: "policy_decision", Request: req}
			if vault != "" {
				// Judged as proxy exec judges it: through the vault's symlinks.
				h, err := a.home()
				if err != nil {
					return nil, err
				}
				r.Vault = &vault
				rt, err := a.proxyRuntime(h, vault)
				if err != nil {
					return nil, err
				}
				r.Decision = rt.Classify(vault, req)
				// The mount a run would start; a live one it would reuse
				// is bound the same way.
				plan, err := rt.Sandbox(proxy.Request{Vault: vault, Isolate: isolate}, r.Decision, false, rt.Mountpoint(vault, false), false)
				if err != nil {
					return nil, err
				}
				r.Isolation = &plan.Isolation
			} else {
				r.Decision = policy.Classify(req, p)
			}
			return r, nil
		}),
	}
	c.Flags().SetInterspersed(false)
	c.Flags().StringVar(&shell, "shell", "", "a shell script to classify as a whole")
	c.Flags().StringVar(&cwd, "cwd", "/", "working directory inside the vault (for .. checks, through the vault's symlinks)")
	c.Flags().StringArrayVar(&env, "env", nil, "KEY=VALUE the command would get with proxy exec --env (repeatable)")
	c.Flags().StringVar(&isolate, "isolate", string(sandbox.Auto), "the --isolate of the run to show: auto, on or off")
	return c
}
