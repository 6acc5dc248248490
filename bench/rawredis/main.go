// Command rawredis runs the benchmark's raw Redis loop (bench/raw) in a
// process of its own, so that its peak RSS can be measured like dlqctl's.
// It prints the number of entries read.
//
//	rawredis ADDR KEY
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/dlqctl/dlqctl/bench/raw"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: rawredis ADDR KEY")
		os.Exit(2)
	}
	n, err := raw.RedisLoop(context.Background(), raw.NewRedisClient(os.Args[1]), os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawredis:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}
