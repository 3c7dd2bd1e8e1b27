package proxy_test

import (
	"strings"
	"testing"
)

// TestRunEnvironmentStable: two runs of one vault give their commands the
// same environment (AVFS_PROXY_RUN is the vault's name, not the run's id),
// so a tool that caches on its environment hits its cache the second time;
// the run ids, in the envelopes, still differ.
func TestRunEnvironmentStable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.exec(0, "", "--isolate", "off", "--", "env")
	second := e.exec(0, "", "--isolate", "off", "--", "env")
	if first.ID == second.ID {
		t.Fatalf("two runs share the id %s", first.ID)
	}
	if first.Result.Stdout != second.Result.Stdout {
		t.Errorf("the environment changed between runs:\n%s\n---\n%s", first.Result.Stdout, second.Result.Stdout)
	}
	if !strings.Contains("\n"+first.Result.Stdout, "\nAVFS_PROXY_RUN=v\n") {
		t.Errorf("AVFS_PROXY_RUN is not the vault's name:\n%s", first.Result.Stdout)
	}
}
