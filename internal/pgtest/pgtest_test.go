//go:build unix

package pgtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStartExecStop(t *testing.T) {
	s := Start(t)
	if err := s.Exec("CREATE DATABASE app"); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecIn("app", "CREATE TABLE t(id text); INSERT INTO t VALUES ('a'), ('b')"); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecIn("app", "INSERT INTO t VALUES ($1)", "c"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("app"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var fsync string
	err = conn.QueryRow(ctx, "SELECT count(*), current_setting('fsync') FROM t").Scan(&n, &fsync)
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || fsync != "off" {
		t.Errorf("count = %d, fsync = %s; want 3, off", n, fsync)
	}

	pid, dir := s.PID(), s.dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster %d still there after Stop (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data folder %s still there after Stop (%v)", dir, err)
	}
}

func TestRunsUnprivileged(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The server refuses root, so reaching it at all shows it is not; the
	// data folder's owner shows whom it runs as.
	fi, err := os.Stat(filepath.Join(s.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if os.Geteuid() == 0 && uid == 0 {
		t.Errorf("data folder owned by root")
	}
	if os.Geteuid() != 0 && int(uid) != os.Geteuid() {
		t.Errorf("data folder owned by %d, want the tests' user %d", uid, os.Geteuid())
	}
}

func TestFindBinaries(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "13"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"postgres", "initdb"} {
			if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	notInPath := func(string) (string, error) { return "", errors.New("not in PATH") }
	b, err := findBinaries(filepath.Join(root, "*", "bin"), notInPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin", "postgres"); b.postgres != want {
		t.Errorf("postgres = %s, want the highest version %s", b.postgres, want)
	}

	_, err = findBinaries(filepath.Join(t.TempDir(), "*", "bin"), notInPath)
	if err == nil || err.Error() != NotFoundMessage {
		t.Errorf("err = %v, want %q", err, NotFoundMessage)
	}

	inPath := func(name string) (string, error) { return "/opt/pg/bin/" + name, nil }
	b, err = findBinaries(filepath.Join(t.TempDir(), "*", "bin"), inPath)
	if err != nil || !strings.HasSuffix(b.initdb, "/opt/pg/bin/initdb") {
		t.Errorf("from PATH: %+v, %v", b, err)
	}
}
