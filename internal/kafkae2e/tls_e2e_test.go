package kafkae2e

import (
	"net/url"
	"strings"
	"testing"
)

// TestTLSEndToEnd drives the dlqctl binary over the broker's SASL_SSL
// listener with SCRAM-SHA-512, the password from DLQCTL_KAFKA_PASSWORD
// and the test CA from tls_ca=: list reads the DLT, a plan / approve /
// apply redrives it exactly once, and a wrong password is exit 1 with
// "authentication failed" and neither password anywhere in the output.
func TestTLSEndToEnd(t *testing.T) {
	broker := kafkaServer(t)
	ctx := testCtx(t)
	const n = 4
	origin, dlt := seedSpringDLT(t, ctx, n)
	s := broker.TLS()
	dir := t.TempDir()
	src := []string{"--source", "kafkas://" + s.User + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=scram-sha-512&tls_ca=" + url.QueryEscape(s.CA)}
	env := []string{"DLQCTL_KAFKA_PASSWORD=" + s.Password}
	noSecret := func(what, out string) {
		t.Helper()
		if strings.Contains(out, s.Password) {
			t.Fatalf("%s shows the password:\n%s", what, out)
		}
	}

	code, out := dlqctl(t, dir, env, append(src, "list", "-o", "json")...)
	noSecret("list", out)
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if code != 0 {
		t.Fatalf("list over kafkas://: exit %d\n%s", code, out)
	}
	jsonDoc(t, out, &list)
	if len(list.Items) != n {
		t.Fatalf("list over kafkas://: %d items\n%s", len(list.Items), out)
	}

	plan := append(src, "redrive", "plan", "--reason", "tls", "--rate", "0", "--settle", "0s", "--unverified-ok", "--out", "p.json")
	if code, out := dlqctl(t, dir, env, plan...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	} else {
		noSecret("plan", out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	code, out = dlqctl(t, dir, env, append(src, "redrive", "apply", "p.json", "-o", "json")...)
	noSecret("apply", out)
	var run struct {
		Status string `json:"status"`
		Moved  int    `json:"moved"`
	}
	if code != 0 {
		t.Fatalf("apply over kafkas://: exit %d\n%s", code, out)
	}
	jsonDoc(t, out, &run)
	if run.Status != "completed" || run.Moved != n {
		t.Fatalf("apply: %s", out)
	}
	count := originEvents(t, ctx, origin)
	if len(count) != n {
		t.Fatalf("origin holds %v", count)
	}
	for id, c := range count {
		if c != 1 {
			t.Fatalf("%s on the origin %d times", id, c)
		}
	}

	// A wrong password, from the environment and then in the URL.
	const wrong = "Wr0ng-hunter-77"
	bad := "kafkas://" + s.User + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=scram-sha-512&timeout=5s&tls_ca=" + url.QueryEscape(s.CA)
	badURL := "kafkas://" + s.User + ":" + wrong + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=scram-sha-512&timeout=5s&tls_ca=" + url.QueryEscape(s.CA)
	for what, c := range map[string]struct {
		url string
		env []string
	}{"env": {bad, []string{"DLQCTL_KAFKA_PASSWORD=" + wrong}}, "url": {badURL, nil}} {
		code, out := dlqctl(t, dir, c.env, "--source", c.url, "-o", "json", "list")
		if code != 1 || !strings.Contains(out, "authentication failed") || !strings.Contains(out, `"code":1`) {
			t.Fatalf("wrong password (%s): exit %d, want 1\n%s", what, code, out)
		}
		if strings.Contains(out, wrong) {
			t.Fatalf("wrong password (%s) shown:\n%s", what, out)
		}
	}
}
