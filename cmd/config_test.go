package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileKeysTheBackendsDeclare: a profile key a backend declares
// (redis_password) reaches that backend as a secret, as does a key under
// secrets:; a key no backend of the build declares is refused (exit 2),
// named, with the keys a profile takes.
func TestProfileKeysTheBackendsDeclare(t *testing.T) {
	write := func(body string) string {
		path := filepath.Join(t.TempDir(), "dlqctl.yaml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	getenv := func(string) string { return "" }
	good := write("profiles:\n  prod:\n    source: redis://h:6379/0?stream=dlq\n    redis_password: pw1\n    secrets:\n      kafka_password: pw2\n")
	cfg, err := loadConfig(good, getenv, []string{"pulsar_token", "redis_password"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.profile("prod")
	if err != nil {
		t.Fatal(err)
	}
	if p.secret("redis_password") != "pw1" || p.secret("kafka_password") != "pw2" || p.secret("pulsar_token") != "" {
		t.Errorf("secrets: redis %q, kafka %q, pulsar %q", p.secret("redis_password"), p.secret("kafka_password"), p.secret("pulsar_token"))
	}

	typo := write("profiles:\n  prod:\n    source: dir:q\n    redis_pasword: pw1\n")
	_, err = loadConfig(typo, getenv, []string{"pulsar_token", "redis_password"})
	if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), `profile "prod": unknown key "redis_pasword"`) ||
		!strings.Contains(err.Error(), "source, fields,") || !strings.Contains(err.Error(), "redis_password") {
		t.Errorf("a typo: %v (exit %d)", err, exitCode(err))
	}
	if _, err := loadConfig(good, getenv, nil); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), `unknown key "redis_password"`) {
		t.Errorf("a build without the backend that declares it: %v", err)
	}
}
