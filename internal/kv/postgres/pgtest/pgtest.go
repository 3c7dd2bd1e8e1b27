// Package pgtest runs a real PostgreSQL server for tests: initdb and
// pg_ctl under a temporary directory, listening on a Unix socket only,
// one server per test package (started by the first test that needs it,
// stopped by Main in TestMain) and one database per test (DSN).
//
// The server refuses to run as root, so as root the binaries run as the
// postgres user. When no server can be started the tests that need one
// fail with the reason if the CI environment variable is set, and are
// skipped with it otherwise.
//
// A server never outlives the process that started it (serve.go): the
// postmaster is that process's child, with a parent-death signal, and a
// server whose starter died anyway (its directory names the starter) is
// stopped and removed by the next Start.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Password is the password of PasswordUser, the one role that must give
// one: every other local connection is trusted.
const (
	PasswordUser = "avfs_pw"
	Password     = "s3cret-pw-never-printed"
)

// Server is a running test server.
type Server struct {
	dir    string              // owned by the server's user; removed by Stop
	Socket string              // the directory holding the Unix socket
	runAs  string              // "" when the binaries run as this process's user
	cred   *syscall.Credential // runAs's, for the postmaster
	bin    string
	n      atomic.Int64
	exited chan struct{} // closed once the postmaster has exited
}

var (
	once     sync.Once
	server   *Server
	startErr error
	mainRan  bool
)

// Main runs the tests and stops the package's server if one of them
// started it. Use it as the body of TestMain. The server starts on the
// first Get, so test binaries that run as helper processes (a crash
// test's child) and tests that need no server never start one.
func Main(m *testing.M) int {
	mainRan = true
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// TB is the part of testing.TB (and of rapid.T) that pgtest uses.
type TB interface {
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// Get returns the package's server, starting it on first use; it fails t
// (under CI) or skips it when no server can be started.
func Get(t TB) *Server {
	if !mainRan {
		t.Fatalf("pgtest: call pgtest.Main from TestMain, so the server is stopped")
	}
	once.Do(func() {
		server, startErr = Start(Options{Fast: true})
		if startErr != nil {
			fmt.Fprintf(os.Stderr, "pgtest: no PostgreSQL server: %v\n", startErr)
		}
	})
	if server == nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL tests must run under CI: %v", startErr)
		}
		t.Skipf("no PostgreSQL server: %v", startErr)
	}
	return server
}

// DSN creates a new, empty database on the package's server for t, drops
// it when t ends, and returns a DSN that connects to it as the superuser.
func DSN(t TB) string {
	s := Get(t)
	name, err := s.CreateDatabase()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.DropDatabase(name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s.DSN(name)
}

// Options are a server's settings.
type Options struct {
	// Fast turns off fsync and synchronous commit: right for tests, which
	// kill clients but never the machine; wrong for benchmarks.
	Fast bool
}

// Start runs initdb and starts a server in a new temporary directory.
func Start(opts Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		s.runAs = "postgres"
	}
	sweepOrphans()
	s.dir, err = os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, err
	}
	if err := writeOwner(s.dir); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if s.runAs != "" {
		u, err := user.Lookup(s.runAs)
		if err != nil {
			return fail(fmt.Errorf("running as root needs the %s user: %w", s.runAs, err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	s.Socket = s.dir
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, out))
	}
	// PasswordUser must give its password; everyone else is trusted.
	hba := filepath.Join(data, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(hba, append([]byte("local all "+PasswordUser+" scram-sha-256\n"), old...), 0o600); err != nil {
		return fail(err)
	}
	if err := s.serve(data, opts); err != nil {
		return fail(err)
	}
	if err := s.exec("postgres", fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", PasswordUser, Password)); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// BinEnv, when set, names the directory of initdb and pg_ctl instead of
// the search below (another version; or a missing one, to see the tests
// skip, or fail under CI).
const BinEnv = "AVFS_TEST_PG_BIN"

// binDir finds PostgreSQL's server binaries (Debian keeps them out of PATH).
func binDir() (string, error) {
	if d := os.Getenv(BinEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinEnv, d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb not found under /usr/lib/postgresql/*/bin or in PATH (Debian package postgresql; scripts/deps.sh installs it)")
}

func (s *Server) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	// Its own process group: a test's Ctrl-C must not reach the server
	// before Stop does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.CombinedOutput()
}

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() error {
	out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	if err != nil {
		err = fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	if s.exited != nil {
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			if err == nil {
				err = errors.New("pgtest: the postmaster did not exit within 30 s of its stop")
			}
		}
	}
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

// Log is what the server has logged so far (its errors: a transaction
// that failed to serialize is logged with its statement).
func (s *Server) Log() ([]byte, error) { return os.ReadFile(filepath.Join(s.dir, "log")) }

// DSN returns a URL that connects to database db as the superuser over
// the Unix socket.
func (s *Server) DSN(db string) string {
	return "postgres://postgres@/" + db + "?host=" + url.QueryEscape(s.Socket)
}

// PasswordDSN connects to db as PasswordUser with password pw.
func (s *Server) PasswordDSN(db, pw string) string {
	return "postgres://" + PasswordUser + ":" + url.QueryEscape(pw) + "@/" + db + "?host=" + url.QueryEscape(s.Socket)
}

var dbMu sync.Mutex

// CreateDatabase creates a new empty database and returns its name.
func (s *Server) CreateDatabase() (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n.Add(1))
	// CREATE DATABASE copies template1 and takes a lock on it: one at a
	// time, or parallel tests wait on each other's copies anyway.
	dbMu.Lock()
	defer dbMu.Unlock()
	return name, s.exec("postgres", "CREATE DATABASE "+name)
}

// DropDatabase drops db, closing connections still open on it.
func (s *Server) DropDatabase(db string) error {
	return s.exec("postgres", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
}

// Exec runs sql on database db as the superuser.
func (s *Server) Exec(db, sql string) error { return s.exec(db, sql) }

func (s *Server) exec(db, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: %s: %w", strings.Fields(sql)[0], err)
	}
	return nil
}

// QueryInt runs a query of one integer on database db.
func (s *Server) QueryInt(db, sql string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return 0, fmt.Errorf("pgtest: connect: %w", err)
	}
	defer c.Close(ctx)
	var n int
	return n, c.QueryRow(ctx, sql).Scan(&n)
}

// Tag returns dsn with its sessions named name (application_name), so
// WaitGone can find them on the server.
func Tag(dsn, name string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "application_name=" + url.QueryEscape(name)
}

// WaitGone waits until the server holds no session named name (Tag),
// polling through a connection of its own to dsn. A killed client's
// transaction is decided by its server, not by its death: a COMMIT it
// sent goes on running, and its result becomes visible only when it
// ends, perhaps well after the kill. Once the client's sessions are gone,
// everything it sent has been carried out or rolled back.
func WaitGone(dsn, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	defer c.Close(context.Background())
	for {
		var n int
		err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name).Scan(&n)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("pgtest: sessions named %q still running after %v", name, timeout)
		case err != nil:
			return fmt.Errorf("pgtest: pg_stat_activity: %w", err)
		case n == 0:
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}
