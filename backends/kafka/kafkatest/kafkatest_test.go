package kafkatest

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestStartRestartStop runs the real broker: it answers on its address,
// comes back on the same address after a restart, and is gone after Stop.
func TestStartRestartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kafka broker (Java): not in the -short tier")
	}
	b, err := StartProcess()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	dial := func() error {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(context.Background(), "tcp", b.Bootstrap())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("broker at %s: %v", b.Bootstrap(), err)
	}
	addr, pid := b.Bootstrap(), b.PID()
	if pid == 0 {
		t.Fatal("no PID recorded")
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if b.Bootstrap() != addr || b.PID() == pid || b.PID() == 0 {
		t.Fatalf("after restart: address %s (was %s), pid %d (was %d)", b.Bootstrap(), addr, b.PID(), pid)
	}
	if err := dial(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err == nil {
		t.Fatal("broker still answers after Stop")
	}
}
