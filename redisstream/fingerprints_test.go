package redisstream

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/dlqctl/dlqctl/envelope"
)

// idFP is one answer of ScanFingerprints.
type idFP struct{ id, fp string }

func scanFingerprints(t *testing.T, s *Stream) []idFP {
	t.Helper()
	var out []idFP
	if err := s.ScanFingerprints(context.Background(), func(id, fp string) error {
		out = append(out, idFP{id, fp})
		return nil
	}); err != nil {
		t.Fatalf("ScanFingerprints: %v", err)
	}
	return out
}

// fingerprintsByFullRead is what ScanFingerprints answered when it read
// every field of every entry (before the server picked the fingerprint):
// the first name with a non-empty value, else the full decode's.
func fingerprintsByFullRead(t *testing.T, s *Stream) []idFP {
	t.Helper()
	msgs, err := s.rdb.XRange(context.Background(), s.key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []idFP
	for _, m := range msgs {
		fp := ""
		for _, n := range s.names[envelope.FieldFingerprint] {
			if v, ok := m.Values[n].(string); ok && v != "" {
				fp = v
				break
			}
		}
		if fp == "" {
			fp = s.decode(m).Fingerprint
		}
		out = append(out, idFP{m.ID, fp})
	}
	return out
}

func TestScanFingerprints(t *testing.T) {
	k := key(t, "dlq")
	rdb := shared.Client()
	carried := "sha256:" + fmt.Sprintf("%064x", 7)
	xadd(t, rdb, k, "event_id", "E1", "fingerprint", carried, "payload", `{"a":1}`)
	xadd(t, rdb, k, "event_id", "E2", "payload", `{"b":2}`) // none carried: computed
	xadd(t, rdb, k, "event_id", "E3", "fingerprint", "", "payload", `{"c":3}`)
	xadd(t, rdb, k, "event_id", "E4", "fp", "sha256:ALIAS", "payload", `{}`)
	xadd(t, rdb, k, "event_id", "E5", "fingerprint", "sha256:First", "fingerprint", "sha256:second", "payload", `{}`)
	xadd(t, rdb, k, "event_id", "E6", "fp", "sha256:alias-loses", "fingerprint", "SHA256:Upper", "payload", `{}`)
	xadd(t, rdb, k, "event_id", "E7", "payload", "\xff\xfe not utf-8")
	xadd(t, rdb, k, "event_id", "E8") // no payload: malformed, still listed
	names := envelope.FieldNames{envelope.FieldFingerprint: {"fingerprint", "fp"}}
	for _, pageSize := range []int{1, 3, 4, 8, 1000} {
		t.Run(fmt.Sprintf("page%d", pageSize), func(t *testing.T) {
			s := openStream(t, shared.URL(0, k), Options{PageSize: pageSize, Fields: names})
			got, want := scanFingerprints(t, s), fingerprintsByFullRead(t, s)
			if len(got) != 8 || !reflect.DeepEqual(got, want) {
				t.Fatalf("ScanFingerprints =\n%v\nwant (a full read of every entry)\n%v", got, want)
			}
		})
	}
	s := openStream(t, shared.URL(0, k), Options{PageSize: 3, Fields: names})
	got := scanFingerprints(t, s)
	if got[0].fp != carried || got[1].fp != envelope.ComputeFingerprint([]byte(`{"b":2}`)) ||
		got[3].fp != "sha256:ALIAS" || got[4].fp != "sha256:second" || got[5].fp != "SHA256:Upper" {
		t.Errorf("fingerprints = %v", got)
	}

	// With the default names only "fingerprint" counts; fp is another field.
	def := openStream(t, shared.URL(0, k), Options{PageSize: 3})
	if got, want := scanFingerprints(t, def), fingerprintsByFullRead(t, def); !reflect.DeepEqual(got, want) {
		t.Errorf("default names: %v, want %v", got, want)
	}

	boom := errors.New("boom")
	n := 0
	err := s.ScanFingerprints(context.Background(), func(string, string) error {
		if n++; n == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 5 {
		t.Errorf("fn error at 5: %v after %d, want boom after 5", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.ScanFingerprints(ctx, func(string, string) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	empty := openStream(t, shared.URL(0, key(t, "none")), Options{})
	if got := scanFingerprints(t, empty); len(got) != 0 {
		t.Errorf("missing stream: %v", got)
	}
}
