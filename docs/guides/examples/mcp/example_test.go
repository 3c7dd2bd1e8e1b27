// Package mcp_test runs the MCP guide: its client configuration and every
// example call of its table, against a real `avfs mcp` started as the
// configuration says, through the Go SDK's client.
package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
)

// config is the part of a client's server list the guide shows.
type config struct {
	MCPServers map[string]struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	} `json:"mcpServers"`
}

// TestGuide starts the server of config.json with the avfs built from this
// checkout on PATH and a fresh AVFS_HOME, and makes the guide's calls.
func TestGuide(t *testing.T) {
	guide, err := os.ReadFile("../../mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("config.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), "```json\n"+string(raw)+"```") {
		t.Errorf("mcp.md does not show config.json as it is")
	}
	var cfg config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	srv := cfg.MCPServers["avfs"]

	fuse := mountd.Available() == nil && os.Geteuid() == 0
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "avfs"), "github.com/agentvfs/agentvfs/cmd/avfs")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building avfs: %v\n%s", err, out)
	}
	home := t.TempDir()
	t.Cleanup(func() {
		if left := mountrec.AvfsMountsUnder(home); len(left) > 0 {
			t.Errorf("mounts left behind: %v", left)
		}
	})
	path, err := exec.LookPath(filepath.Join(bin, srv.Command))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, srv.Args...)
	cmd.Env = append(os.Environ(), "AVFS_PROXY_LINGER=0", "AVFS_VAULT=")
	for k := range srv.Env {
		if k != "AVFS_HOME" {
			t.Errorf("config.json sets %s, which the test does not know", k)
		}
	}
	cmd.Env = append(cmd.Env, "AVFS_HOME="+home)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "guide", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| `(\\{.*?\\})` \\|").FindAllStringSubmatch(string(guide), -1)
	tools := map[string]bool{}
	for _, row := range rows {
		name, args := row[1], row[2]
		tools[name] = true
		if !fuse && (name == "exec" || name == "undo") {
			t.Logf("no FUSE here: %s %s not run", name, args)
			continue
		}
		var in map[string]any
		if err := json.Unmarshal([]byte(args), &in); err != nil {
			t.Fatalf("%s: the guide's arguments are not JSON: %s", name, args)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: in})
		if err != nil {
			t.Fatalf("%s %s: %v", name, args, err)
		}
		out, _ := json.Marshal(res.StructuredContent)
		if res.IsError {
			t.Fatalf("%s %s: %v", name, args, res.Content[0].(*mcp.TextContent).Text)
		}
		switch name {
		case "exec":
			if !strings.Contains(string(out), `"path":"/listing.txt"`) || !strings.Contains(string(out), `"state":"completed"`) {
				t.Errorf("exec: %s", out)
			}
		case "file_read":
			if !strings.Contains(string(out), `"content":"hello, avfs\n"`) {
				t.Errorf("file_read after the edit: %s", out)
			}
		case "vault_list":
			if !strings.Contains(string(out), `"name":"agent"`) || !strings.Contains(string(out), `"name":"agent-try"`) {
				t.Errorf("vault_list: %s", out)
			}
		}
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if !tools[tl.Name] {
			t.Errorf("the guide's table has no call of %s", tl.Name)
		}
	}
}
