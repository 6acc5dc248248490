package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/dlqctl/dlqctl/bench/raw"
	"github.com/dlqctl/dlqctl/envelope"
)

// seedDir writes n envelope files (the canonical envelope form, docs/json.md form, compact JSON) into
// root/error/ and creates root/inbox/.
func seedDir(root string, n int, now time.Time) error {
	errDir := filepath.Join(root, "error")
	for _, d := range []string{errDir, filepath.Join(root, "inbox")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	g := newGenerator(n, now)
	for i := range n {
		x := g.entry(i)
		id := fmt.Sprintf("dl-%09d", i)
		e := envelope.Envelope{
			ID: id, EventID: x.EventID, Fingerprint: x.Fingerprint, PayloadVersion: "3",
			ContentType: "application/json", Key: x.Key,
			Origin:          envelope.Origin{Backend: "dir", Topic: x.OriginStream, Subscription: x.OriginGroup, Consumer: x.OriginConsumer},
			FirstReceivedAt: x.FirstReceivedAt, DeadLetteredAt: x.DeadLetteredAt, Attempts: x.Attempts,
			LastError: x.LastError, ErrorClass: x.ErrorClass, Owner: x.Owner, RecoverBy: x.RecoverBy,
			SchemaInfo: "orders.v3", Properties: map[string]string{"tenant": x.Tenant},
			PayloadEncoding: envelope.EncodingJSON, Payload: x.Payload,
		}
		b, err := e.MarshalJSON()
		if err != nil {
			return fmt.Errorf("entry %d: %v", i, err)
		}
		if err := os.WriteFile(filepath.Join(errDir, id+".json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rawDirResult is what one raw pass did.
type rawDirResult struct {
	Wall   time.Duration
	CPU    time.Duration
	Count  int
	Allocs uint64
	Bytes  uint64
}

// rawDirScan times one pass of the baseline raw.DirLoop in this process.
func rawDirScan(root string) (rawDirResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	n, err := raw.DirLoop(root)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	return rawDirResult{Wall: wall, CPU: cpu, Count: n, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}
