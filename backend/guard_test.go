package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type guardFunc func(dest string) error

func (g guardFunc) GuardDestination(_ context.Context, dest string) error { return g(dest) }

func TestGuardsRefuseOnceAndRemember(t *testing.T) {
	calls := map[string]int{}
	g := NewGuards(guardFunc(func(dest string) error {
		calls[dest]++
		if dest == "orders.DLT" {
			return errors.New(`"orders.DLT" is this DLQ`)
		}
		return nil
	}))
	ctx := context.Background()
	for range 3 {
		if err := g.Check(ctx, "orders"); err != nil {
			t.Fatalf("orders: %v", err)
		}
		err := g.Check(ctx, "orders.DLT")
		if !errors.Is(err, ErrRefusedDestination) {
			t.Fatalf("orders.DLT: %v, want a refusal", err)
		}
		if !strings.Contains(err.Error(), `destination "orders.DLT" refused: "orders.DLT" is this DLQ`) {
			t.Errorf("refusal text %q names neither the destination nor why", err)
		}
	}
	if calls["orders"] != 1 || calls["orders.DLT"] != 1 {
		t.Errorf("the guard was asked %v, want once per destination", calls)
	}
}

func TestGuardsPassOnAFailureToAsk(t *testing.T) {
	n := 0
	g := NewGuards(guardFunc(func(string) error {
		n++
		return &GuardUnavailable{Err: errors.New("admin API down")}
	}))
	for range 2 {
		err := g.Check(context.Background(), "orders")
		if err == nil || errors.Is(err, ErrRefusedDestination) {
			t.Fatalf("a guard that cannot tell: %v, want an error that is not a refusal", err)
		}
	}
	if n != 2 {
		t.Errorf("a failure to ask was remembered (%d calls, want 2): the next check must ask again", n)
	}
}

func TestGuardsWithoutAGuardAllowEverything(t *testing.T) {
	if err := NewGuards(struct{}{}).Check(context.Background(), "anything"); err != nil {
		t.Fatal(err)
	}
	var g *Guards
	if err := g.Check(context.Background(), "anything"); err != nil {
		t.Fatal(err)
	}
}
