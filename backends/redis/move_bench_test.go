package redisstream

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

// benchFields is an entry shaped like the bench's (bench/data.go): 15
// fields, a carried fingerprint, a payload of a few hundred bytes.
func benchFields(i int) []any {
	fp := fmt.Sprintf("sha256:%064x", i)
	payload := `{"orderId":"ord-` + strconv.Itoa(i) + `","amount":1999,"currency":"EUR","channel":"web","items":[{"sku":"sku-1","qty":2},{"sku":"sku-2","qty":1}],"customerId":"cust-42","note":"` + strings.Repeat("x", 120) + `"}`
	return []any{
		"event_id", "evt-" + strconv.Itoa(i), "fingerprint", fp, "payload", payload,
		"content_type", "application/json", "key", "cust-" + strconv.Itoa(i%97),
		"origin_stream", "orders", "origin_group", "order-workers", "origin_consumer", "worker-1",
		"attempts", 5, "last_error", "timeout calling payments: context deadline exceeded",
		"first_received_at", "2026-11-26T10:00:00Z", "dead_lettered_at", "2026-11-26T10:05:00Z",
		"owner", "team-orders", "schema_info", "orders.v3", "tenant", "acme",
	}
}

// clientCPU is this process's user+system CPU so far, in seconds.
func clientCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// serverCPU is redis-server's user+system CPU so far, in µs.
func serverCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var t float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			t += f * 1e6
		}
	}
	return t
}

// evalshaUsec is redis-server's time in EVALSHA so far (INFO
// commandstats), scripts' own commands included.
func evalshaUsec(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					return f
				}
			}
		}
	}
	return 0
}

// seedBench adds n entries shaped like the bench's to stream k, 1,000 per
// round trip, and returns their IDs.
func seedBench(b *testing.B, rdb *redis.Client, k string, n int) []string {
	ctx := context.Background()
	ids := make([]string, 0, n)
	for lo := 0; lo < n; lo += 1000 {
		pipe := rdb.Pipeline()
		cmds := make([]*redis.StringCmd, 0, 1000)
		for i := lo; i < min(lo+1000, n); i++ {
			cmds = append(cmds, pipe.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: benchFields(i)}))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		for _, c := range cmds {
			ids = append(ids, c.Val())
		}
	}
	return ids
}

// BenchmarkPublish moves entries shaped like the bench's in chunks of 256,
// one Publish per chunk, and reports the server's time per entry: the
// part of a redrive's cost the move script decides.
func BenchmarkPublish(b *testing.B) {
	ctx := context.Background()
	rdb := shared.Client()
	k := "bench:publish:dlq"
	dest := "bench:publish:orders"
	s, err := Open(ctx, shared.URL(0, k), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rdb.Del(ctx, k, dest)
	const chunk = 256
	items := make([]backend.MoveItem, 0, b.N)
	for i, id := range seedBench(b, rdb, k, b.N) {
		items = append(items, backend.MoveItem{Seq: int64(i + 1), ID: id, Fingerprint: fmt.Sprintf("sha256:%064x", i), Dest: dest})
	}
	if err := s.move.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	before, cpu0 := evalshaUsec(b, rdb), serverCPU(b, rdb)
	b.ResetTimer()
	for lo := 0; lo < len(items); lo += chunk {
		res, err := s.Publish(ctx, items[lo:min(lo+chunk, len(items))], backend.Markers{RunID: "run-bench"})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric((evalshaUsec(b, rdb)-before)/float64(b.N), "server-µs/entry")
	b.ReportMetric((serverCPU(b, rdb)-cpu0)/float64(b.N), "server-cpu-µs/entry")
	if n := rdb.XLen(ctx, k).Val(); n != 0 {
		b.Fatalf("%d entries left in the DLQ", n)
	}
	rdb.Del(ctx, k, dest)
}

var rawMoveScript = redis.NewScript(`
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return 0 end
redis.call('XADD', KEYS[2], '*', unpack(found[1][2]))
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
`)

func BenchmarkRawMove(b *testing.B) {
	ctx := context.Background()
	rdb := shared.Client()
	k := "bench:raw:dlq"
	dest := "bench:raw:orders"
	rdb.Del(ctx, k, dest)
	ids := seedBench(b, rdb, k, b.N)
	rawMoveScript.Load(ctx, rdb)
	before, cpu0 := evalshaUsec(b, rdb), serverCPU(b, rdb)
	b.ResetTimer()
	for lo := 0; lo < len(ids); lo += 256 {
		pipe := rdb.Pipeline()
		for _, id := range ids[lo:min(lo+256, len(ids))] {
			pipe.EvalSha(ctx, rawMoveScript.Hash(), []string{k, dest}, id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric((evalshaUsec(b, rdb)-before)/float64(b.N), "server-µs/entry")
	b.ReportMetric((serverCPU(b, rdb)-cpu0)/float64(b.N), "server-cpu-µs/entry")
	rdb.Del(ctx, k, dest)
}

// BenchmarkScanFingerprints reads the fingerprints of 100,000 entries
// shaped like the bench's, in one range (one CPU) and in two halves at
// once, with the fast page reader and the plain one (xrange.go).
func BenchmarkScanFingerprints(b *testing.B) {
	ctx := context.Background()
	rdb := shared.Client()
	k := "bench:fingerprints:dlq"
	const n = 100000
	if rdb.XLen(ctx, k).Val() != n {
		rdb.Del(ctx, k)
		seedBench(b, rdb, k, n)
	}
	s, err := Open(ctx, shared.URL(0, k), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		procs int
		form  string
	}{{1, "fast"}, {1, "plain"}, {2, "fast"}, {2, "plain"}} {
		b.Run(fmt.Sprintf("procs%d/%s", c.procs, c.form), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			s.plainPages = c.form == "plain"
			cpu0, own0 := serverCPU(b, rdb), clientCPU()
			for range b.N {
				got := 0
				if err := s.ScanFingerprints(ctx, func(string, string) error { got++; return nil }); err != nil || got != n {
					b.Fatal(err, got)
				}
			}
			b.ReportMetric((serverCPU(b, rdb)-cpu0)/float64(b.N)/1e6, "server-cpu-s/op")
			b.ReportMetric((clientCPU()-own0)/float64(b.N), "client-cpu-s/op")
		})
	}
}
