package pulsardlq_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	pulsardlq "github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/backends/pulsar/pulsartest"
	"github.com/dlqctl/dlqctl/conformance"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(pulsardlq.Registration())

// TestConformance runs the shared conformance suite on Pulsar, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		b := pulsartest.Start(t)
		n := 0
		return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=1s", Refuse: func(t *testing.T, _ conformance.Fixture, dest, _ string) {
			// A terminated topic takes no more messages.
			ctx := context.Background()
			path := "/admin/v2/persistent/" + strings.TrimPrefix(dest, "persistent://")
			if _, err := b.Admin(ctx, http.MethodPut, path, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Admin(ctx, http.MethodPost, path+"/terminate", nil); err != nil {
				t.Fatal(err)
			}
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			base := fmt.Sprintf("persistent://public/default/conf-%d-%d", time.Now().UnixNano(), n)
			q := url.Values{"topic": {base + "-dlq"}, "admin": {b.AdminURL()}}
			cq := url.Values{"topic": {base + "-orders"}, "subscription": {"workers"}}
			aq := url.Values{"topic": {strings.TrimPrefix(base, "persistent://") + "-dlq"}, "admin": {b.AdminURL()}}
			return conformance.Fixture{Source: b.ServiceURL() + "?" + q.Encode(), Origin: base + "-orders", Self: base + "-dlq",
				Alias: b.ServiceURL() + "?" + aq.Encode(),
				Consume: []string{"--source", b.ServiceURL() + "?" + cq.Encode(), "--dlq", base + "-dlq",
					"--max-deliveries", "1", "--redelivery-delay", "100ms"}}
		}}
	})
}
