// Command rawredis runs the benchmark's raw Redis loops (bench/raw) in a
// process of its own, so that its peak RSS and its whole run, start to
// exit, can be measured like dlqctl's. It prints the number of entries
// read.
//
//	rawredis ADDR KEY          the raw stats loop (raw.RedisLoop)
//	rawredis ADDR KEY floor    the bare XRANGE loop (raw.RedisFloorLoop)
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/dlqctl/dlqctl/bench/raw"
)

func main() {
	if len(os.Args) != 3 && (len(os.Args) != 4 || os.Args[3] != "floor") {
		fmt.Fprintln(os.Stderr, "usage: rawredis ADDR KEY [floor]")
		os.Exit(2)
	}
	loop := raw.RedisLoop
	if len(os.Args) == 4 {
		loop = raw.RedisFloorLoop
	}
	n, err := loop(context.Background(), raw.NewRedisClient(os.Args[1]), os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawredis:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}
