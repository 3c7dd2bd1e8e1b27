package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
)

const leaseEnvDSN = "AVFS_TEST_LEASE_DSN"

// TestLeaseTakeover: a process on "host-a" holds the lease; a writer on
// "host-b" is refused with VaultLocked naming host-a and its pid, also
// after the lease's TTL (the heartbeat renews it); once host-a's process
// is killed, host-b takes the lease over within the TTL and a bit.
func TestLeaseTakeover(t *testing.T) {
	_, dsn := newDB(t)
	create1(t, dsn)
	const ttl = time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), leaseEnvDSN+"="+dsn)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "held" {
		t.Fatalf("child: %q, %v", lines.Text(), lines.Err())
	}

	e, err := postgres.Open(dsn, nil)
	must(t, err)
	defer e.Close()
	ctx := context.Background()
	refused := func(when string) {
		t.Helper()
		l, err := e.Lease(ctx, "host-b", os.Getpid(), ttl)
		if err == nil {
			l.Release()
			t.Fatalf("%s: host-b got the lease host-a holds", when)
		}
		var held *postgres.LeaseHeld
		if !errors.As(err, &held) || held.Host != "host-a" || held.PID != cmd.Process.Pid {
			t.Fatalf("%s: %v, want LeaseHeld by host-a pid %d", when, err, cmd.Process.Pid)
		}
		if !errors.Is(err, kv.ErrBusy) || errs.KindOf(err) != errs.VaultLocked {
			t.Errorf("%s: kind %s, want VaultLocked", when, errs.KindOf(err))
		}
		if msg := err.Error(); !strings.Contains(msg, "host-a") || !strings.Contains(msg, fmt.Sprint(cmd.Process.Pid)) {
			t.Errorf("%s: message %q names neither host nor pid", when, msg)
		}
	}
	refused("at once")
	time.Sleep(2 * ttl)
	refused("after two TTLs of heartbeats")
	// Readers never wait for the writer's lease.
	must(t, e.View(func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return err }))

	must(t, cmd.Process.Kill())
	_ = cmd.Wait()
	killed := time.Now()
	var l *postgres.Lease
	for {
		l, err = e.Lease(ctx, "host-b", os.Getpid(), ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, kv.ErrBusy) {
			t.Fatal(err)
		}
		if time.Since(killed) > 3*ttl {
			t.Fatalf("host-a's lease outlived it by %v: %v", time.Since(killed), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("host-b took over %v after host-a was killed (TTL %v)", time.Since(killed).Round(time.Millisecond), ttl)
	must(t, l.Release())
	// Released, the lease is free at once.
	l, err = e.Lease(ctx, "host-c", 1, ttl)
	must(t, err)
	must(t, l.Release())
}

// TestLeaseChild is TestLeaseTakeover's host-a: it takes the lease and
// renews it until killed.
func TestLeaseChild(t *testing.T) {
	dsn := os.Getenv(leaseEnvDSN)
	if dsn == "" {
		t.Skip("helper process of TestLeaseTakeover")
	}
	e, err := postgres.Open(dsn, nil)
	must(t, err)
	if _, err := e.Lease(context.Background(), "host-a", os.Getpid(), time.Second); err != nil {
		t.Fatal(err)
	}
	fmt.Println("held")
	select {}
}
