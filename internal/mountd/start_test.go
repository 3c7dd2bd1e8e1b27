package mountd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// TestStartRelaysProgress: a server that reports progress while it
// prepares (an overlay's first materializing) has each report passed on
// to Request.Progress, and each gives it ReadyTimeout more: readReady
// waits past the timeout as long as reports come.
func TestStartRelaysProgress(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "server")
	script := "#!/bin/sh\nfor i in 1 2 3; do echo '{\"progress\":{\"done\":'$i',\"total\":3}}' >&3; done\n" +
		"echo '{\"ready\":true,\"pid\":'$$'}' >&3\nexec 3>&-\nexit 0\n"
	if err := os.WriteFile(server, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := registry.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	pid, err := Start(context.Background(), server, Request{Home: h, Vault: "v", Mountpoint: filepath.Join(dir, "mnt"),
		Progress: func(done, total int) { got = append(got, done, total) }})
	if err != nil || pid <= 0 {
		t.Fatalf("Start: pid %d, %v", pid, err)
	}
	if want := []int{1, 3, 2, 3, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("progress heard %v, want %v", got, want)
	}

	// Reports spaced wider than the timeout, the reader waits on.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		for i := range 4 {
			time.Sleep(60 * time.Millisecond)
			fmt.Fprintf(pw, `{"progress":{"done":%d,"total":4}}`+"\n", i)
		}
		fmt.Fprintln(pw, `{"ready":true,"pid":7}`)
	}()
	n := 0
	msg, err := readReady(pr, 150*time.Millisecond, func(int, int) { n++ })
	if err != nil || !msg.Ready || msg.PID != 7 || n != 4 {
		t.Errorf("readReady over 240 ms of reports, timeout 150 ms: %+v, %v, %d reports", msg, err, n)
	}
	// Silence longer than the timeout is still a failure.
	pr2, pw2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr2.Close()
	defer pw2.Close()
	fmt.Fprintln(pw2, `{"progress":{"done":1,"total":4}}`)
	if _, err := readReady(pr2, 100*time.Millisecond, nil); !errs.Is(err, MountFailed) {
		t.Errorf("readReady after a report and silence: %v, want MountFailed", err)
	}
}
