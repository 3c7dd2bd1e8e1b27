package mountd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestStartMountStopsOnCancel: a mount whose server has not reported
// ready when ctx ends (Ctrl-C to `avfs mount`, the proxy's run
// interrupted) stops that server and returns Interrupted at once, rather
// than waiting up to 30 s for it. The server here is a program that never
// reports; it must be gone afterwards.
func TestStartStopsOnCancel(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "server")
	pidFile := filepath.Join(dir, "pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + "\nexec sleep 30\n"
	if err := os.WriteFile(server, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := registry.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for i := 0; i < 500; i++ { // until the server runs
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	_, err = Start(ctx, server, Request{Home: h, Vault: "v", Mountpoint: filepath.Join(dir, "mnt")})
	if !errs.Is(err, errs.Interrupted) {
		t.Fatalf("Start after cancel: %v, want Interrupted", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Start took %s to give up", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal("the server never ran")
	}
	pid := string(b[:len(b)-1])
	if _, err := os.Stat("/proc/" + pid); err == nil {
		if st, _ := os.ReadFile("/proc/" + pid + "/stat"); len(st) > 0 && !containsZombie(st) {
			t.Errorf("the server (pid %s) still runs", pid)
		}
	}
}

func containsZombie(stat []byte) bool {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}
