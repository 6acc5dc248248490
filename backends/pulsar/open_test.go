package pulsardlq_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
)

const secret = "s3cret-t0ken-value"

func TestBadURLsAreConfigErrors(t *testing.T) {
	for _, raw := range []string{
		"pulsar://localhost:6650",
		"pulsar://localhost:6650?topic=",
		"pulsar://localhost:99999?topic=dlq",
		"pulsar://user:" + secret + "@localhost:6650?topic=dlq",
		"pulsar://localhost:6650?topic=dlq&token=" + secret,
		"pulsar://localhost:6650?topic=dlq&topic=other",
		"pulsar://localhost:6650?topic=non-persistent://public/default/dlq",
		"pulsar://localhost:6650?topic=public/dlq",
		"pulsar://localhost:6650?topic=dlq&subscription=",
		"pulsar://localhost:6650?topic=dlq&tls_ca=/etc/ca.pem",
		"pulsar+ssl://localhost:6651?topic=dlq&tls_insecure=maybe",
		"pulsar+ssl://localhost:6651?topic=dlq&tls_ca=/does/not/exist.pem",
		"pulsar://localhost:6650?topic=dlq&admin=ftp://localhost",
		"pulsar://localhost:6650?topic=dlq&admin=http://admin:" + secret + "@localhost:8080",
		"pulsar://localhost:6650/some/path?topic=dlq",
		"http://localhost:6650?topic=dlq",
		"pulsar:dlq",
		"pulsar://%zz?topic=dlq",
	} {
		tp, err := pulsardlq.Open(context.Background(), raw, pulsardlq.Options{Token: secret})
		var ce *backend.ConfigError
		if !errors.As(err, &ce) {
			if tp != nil {
				_ = tp.Close()
			}
			t.Errorf("%s: err = %v, want a ConfigError", raw, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the secret: %v", raw, err)
		}
	}
}

func TestUnreachableBroker(t *testing.T) {
	broker := pulsarServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, raw := range []string{
		// Nothing listens on port 1: the admin API fails first.
		"pulsar://127.0.0.1:1?topic=dlq&admin=http://127.0.0.1:1",
		// The admin API answers but the broker URL is wrong.
		"pulsar://127.0.0.1:1?topic=dlq&admin=" + url.QueryEscape(broker.AdminURL()),
	} {
		began := time.Now()
		tp, err := pulsardlq.Open(ctx, raw, pulsardlq.Options{Token: secret, OperationTimeout: 3 * time.Second})
		if err == nil {
			_ = tp.Close()
			t.Fatalf("%s: opened", raw)
		}
		var ce *backend.ConfigError
		if errors.As(err, &ce) {
			t.Errorf("%s: a connection failure is not a configuration error: %v", raw, err)
		}
		if !strings.Contains(err.Error(), "pulsar://127.0.0.1:1") || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: err = %v, want the URL named and no token", raw, err)
		}
		t.Logf("%s: %v (after %s)", raw, err, time.Since(began).Round(time.Millisecond))
	}
}

func TestTokenIsNeverShown(t *testing.T) {
	broker := pulsarServer(t)
	topic := freshTopic(t, "")
	tp := open(t, topic, pulsardlq.Options{Token: secret})
	if strings.Contains(tp.String(), secret) {
		t.Errorf("String() = %s", tp)
	}
	if !strings.HasPrefix(tp.String(), broker.ServiceURL()+"?") {
		t.Errorf("String() = %s", tp)
	}

	// Through the command: env token, token file, and a failing source.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{
		{"DLQCTL_PULSAR_TOKEN": secret},
		{"DLQCTL_PULSAR_TOKEN_FILE": tokenFile},
	} {
		out, errOut, code := dlqctl(t, env, nil, "--source", sourceURL(t, topic), "stats", "-o", "json")
		if code != 0 || strings.Contains(string(out)+string(errOut), secret) {
			t.Errorf("stats with %v: exit %d\n%s\n%s", env, code, out, errOut)
		}
		bad := "pulsar://127.0.0.1:1?topic=dlq&admin=http://127.0.0.1:1"
		out, errOut, code = dlqctl(t, env, nil, "--source", bad, "list", "-o", "json")
		if code != 1 || strings.Contains(string(out)+string(errOut), secret) || !strings.Contains(string(errOut), "127.0.0.1:1") {
			t.Errorf("list on an unreachable broker with %v: exit %d\n%s\n%s", env, code, out, errOut)
		}
	}
	_, errOut, code := dlqctl(t, map[string]string{"DLQCTL_PULSAR_TOKEN_FILE": filepath.Join(t.TempDir(), "none")}, nil,
		"--source", sourceURL(t, topic), "stats")
	if code != 2 || !strings.Contains(string(errOut), "DLQCTL_PULSAR_TOKEN_FILE") {
		t.Errorf("missing token file: exit %d, %s", code, errOut)
	}
	_, errOut, code = dlqctl(t, nil, nil, "--source", "pulsar://localhost?topic=dlq&bogus=1", "stats")
	if code != 2 {
		t.Errorf("bad URL through the command: exit %d, %s", code, errOut)
	}
}
