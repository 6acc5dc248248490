package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/dlqctl/dlqctl/backends/pulsar/pulsartest"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/crashhook"
)

// The scripts in testdata/script run the real dlqctl command. They share
// one real redis-server and one real Pulsar standalone broker, started
// here for the whole run.
func TestMain(m *testing.M) {
	testscript.Main(withServers{m}, map[string]func(){
		"dlqctl": func() { os.Exit(cmd.MainWith(testFactory())) },
	})
}

// testFactory is the production factory with one difference: the clock can
// be pinned by DLQCTL_TEST_NOW, so that ages and overdue counts in the
// scripts do not depend on the day they run.
func testFactory() *cmd.Factory {
	now := time.Now
	if s := os.Getenv("DLQCTL_TEST_NOW"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "DLQCTL_TEST_NOW:", err)
			os.Exit(2)
		}
		now = func() time.Time { return t }
	}
	d := deps(cmd.BuildInfo{Version: "test"})
	d.Now, d.CrashHook = now, crashhook.Parse(os.Getenv("DLQCTL_TEST_CRASH"))
	return &cmd.Factory{Deps: d}
}

// pulsarBroker is the run's Pulsar broker, for tests that need more than
// its URLs (EnableDeduplication, Restart).
var pulsarBroker *pulsartest.Broker

// withServers starts the servers the tests share and exports their
// addresses: DLQCTL_TEST_REDIS_ADDR, DLQCTL_TEST_PULSAR_URL (the broker's
// pulsar:// service URL) and DLQCTL_TEST_PULSAR_ADMIN (its admin base URL).
// A server that cannot start fails the run; nothing is skipped.
type withServers struct{ m *testing.M }

func (w withServers) Run() int {
	srv, err := redistest.StartProcess()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer srv.Stop()
	os.Setenv("DLQCTL_TEST_REDIS_ADDR", srv.Addr())
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		// The fast tier starts no Java server; the Pulsar tests say they
		// are left out.
		return w.m.Run()
	}
	b, err := pulsartest.StartProcess()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the tests need a Pulsar broker:", err)
		return 1
	}
	pulsarBroker = b
	os.Setenv("DLQCTL_TEST_PULSAR_URL", b.ServiceURL())
	os.Setenv("DLQCTL_TEST_PULSAR_ADMIN", b.AdminURL())
	code := w.m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "Pulsar broker log tail:\n%s\n", b.LogTail(30))
	}
	if err := b.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func TestScripts(t *testing.T) {
	incident, err := filepath.Abs("testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			name := filepath.Base(env.WorkDir)
			env.Setenv("INCIDENT", incident)
			env.Setenv("DLQCTL_TEST_NOW", "2026-11-29T12:00:00Z")
			env.Setenv("REDIS_ADDR", os.Getenv("DLQCTL_TEST_REDIS_ADDR"))
			// Each script gets its own keys on the shared server.
			env.Setenv("KEY", strings.ReplaceAll(name, "/", "-"))
			env.Setenv("NO_COLOR", "")
			return nil
		},
	})
}
