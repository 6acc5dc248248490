package kafkadlq_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

// TestSASLOverTLS reads and redrives through the broker's SASL_SSL
// listener (a certificate signed by a CA made for the test, trusted with
// tls_ca=), with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; without the CA
// the handshake is refused, and a wrong password is an authentication
// error that never shows the password.
func TestSASLOverTLS(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	s := broker.TLS()
	ca := url.QueryEscape(s.CA)
	for _, mech := range []string{"scram-sha-256", "scram-sha-512", "plain"} {
		t.Run(mech, func(t *testing.T) {
			origin := freshTopic(t, "")
			dlt := origin + ".DLT"
			createTopic(t, ctx, origin, 1, nil)
			createTopic(t, ctx, dlt, 1, nil)
			now := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
			produceManual(t, ctx,
				springDeadLetter(dlt, 0, now, origin, 0, 1, "k1", "E1", `{"n":1}`, "timeout"),
				springDeadLetter(dlt, 0, now.Add(time.Second), origin, 0, 2, "k2", "E2", `{"n":2}`, "timeout"))
			base := "kafkas://" + s.User + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=" + mech + "&tls_ca=" + ca
			src, err := kafkadlq.Open(ctx, base, kafkadlq.Options{Password: s.Password, TransactionTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if strings.Contains(src.String(), s.Password) {
				t.Fatalf("String() shows the password: %s", src)
			}
			got := scanAll(t, ctx, src, "")
			if len(got) != 2 || got[0].EventID != "E1" || got[1].EventID != "E2" {
				t.Fatalf("read back %s", ids(got))
			}
			res, err := src.Publish(ctx, itemsOf(got[:1], origin), backend.Markers{RunID: "tls-" + mech})
			if err != nil || res[0].Err != nil || !res[0].Removed {
				t.Fatalf("redrive over TLS: %v %+v", err, res)
			}
			if out := readCommitted(t, ctx, origin); len(out) != 1 || string(out[0].Key) != "k1" {
				t.Fatalf("origin holds %d records", len(out))
			}
			if left := scanAll(t, ctx, src, ""); len(left) != 1 || left[0].EventID != "E2" {
				t.Fatalf("left in the DLT: %s", ids(left))
			}

			// The password in the URL, wrong: an authentication error,
			// not a configuration one, and no password in it.
			const wrong = "wrong-Passw0rd-xyz"
			bad := "kafkas://" + s.User + ":" + wrong + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=" + mech + "&tls_ca=" + ca + "&timeout=5s"
			_, err = kafkadlq.Open(ctx, bad, kafkadlq.Options{})
			var ce *backend.ConfigError
			if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), wrong) {
				t.Fatalf("wrong password: %v", err)
			}
			t.Logf("wrong password: %v", err)
		})
	}
	t.Run("untrusted", func(t *testing.T) {
		dlt := freshTopic(t, ".DLT")
		createTopic(t, ctx, dlt, 1, nil)
		raw := "kafkas://" + s.User + ":" + s.Password + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=scram-sha-512&timeout=5s"
		_, err := kafkadlq.Open(ctx, raw, kafkadlq.Options{})
		if err == nil || !strings.Contains(err.Error(), "tls_ca") || strings.Contains(err.Error(), s.Password) {
			t.Fatalf("a CA the system does not trust: %v", err)
		}
		t.Logf("untrusted: %v", err)
	})
}
