package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSOptionsConfig(t *testing.T) {
	c, err := TLSOptions{}.Config("broker.example")
	if err != nil || c.ServerName != "broker.example" || c.InsecureSkipVerify || c.RootCAs != nil {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = TLSOptions{Insecure: true, ServerName: "other"}.Config("broker.example")
	if err != nil || c.ServerName != "other" || !c.InsecureSkipVerify {
		t.Fatalf("options: %+v, %v", c, err)
	}
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	if _, err := (TLSOptions{CA: notPEM}).Config(""); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without PEM: %v", err)
	}
	if _, err := (TLSOptions{CA: filepath.Join(dir, "missing")}).Config(""); err == nil || !strings.HasPrefix(err.Error(), "tls_ca: ") {
		t.Errorf("a missing CA file: %v", err)
	}
}
