// Command dlqctl inspects dead-letter queues and redrives them safely.
package main

import (
	"os"
	"time"

	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/effects/rediseffects"
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
	os.Exit(cmd.MainWith(&cmd.Factory{Deps: deps(cmd.BuildInfo{Version: version, Commit: commit, Date: date})}))
}

// deps are what every command is given: the process's streams, clock and
// environment, and what this build holds (its backends, its effects
// stores). This is the one place that names them.
func deps(build cmd.BuildInfo) cmd.Deps {
	return cmd.Deps{IO: cmd.SystemIO(), Now: time.Now, Getenv: os.Getenv, Build: build,
		Backends: all.Registry(), Effects: effects.Stores{Redis: rediseffects.Store{}}}
}
