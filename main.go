// Command dlqctl inspects dead-letter queues and redrives them safely.
package main

import (
	"os"

	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/tuning"
)

// Set by the linker: -X main.version=… -X main.commit=… -X main.date=…
var (
	version string
	commit  string
	date    string
)

func main() {
	// Start-up made nearly all of the executable resident: give it back
	// before the command runs.
	tuning.ReleaseExecutable()
	os.Exit(cmd.Main(cmd.BuildInfo{Version: version, Commit: commit, Date: date}))
}
