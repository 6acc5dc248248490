package natsdlq

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
)

// What survives a crash of nats-server depends on the stream's storage
// and persist mode. A file stream in the default persist mode writes a
// publish and a delete to its files before it acknowledges them: a
// SIGKILL loses neither (what an OS crash may lose within the sync
// interval is the host's matter). A stream with persist_mode async
// acknowledges first and writes a few milliseconds later: a SIGKILL then
// loses acknowledged publishes and brings deleted messages back. A memory
// stream loses everything.

// lostOnCrash says what a crash of the server can undo on a stream with
// cfg ("" when nothing it acknowledged).
func lostOnCrash(cfg jetstream.StreamConfig) string {
	switch {
	case cfg.Storage == jetstream.MemoryStorage:
		return "memory storage: a restart of the server loses every message it holds"
	case cfg.PersistMode == jetstream.AsyncPersistMode:
		return "persist_mode async: the server acknowledges a publish or a delete before it writes it, so a crash loses acknowledged publishes and brings deleted messages back"
	}
	return ""
}

// checkDurableDLQ refuses to move entries out of a DLQ stream whose
// deletes a crash can undo (persist_mode async): what a run removed would
// come back and be moved a second time by a later plan. A memory DLQ loses
// its dead letters in a crash, but brings nothing back.
func (s *Stream) checkDurableDLQ(ctx context.Context) error {
	if s.missing {
		return nil
	}
	in, err := s.info(ctx)
	if err != nil {
		return err
	}
	if in.Config.PersistMode != jetstream.AsyncPersistMode {
		return nil
	}
	return backend.Configf("%s: the stream %q has %s; a run's removals could come back and be moved again, so dlqctl moves nothing out of it. %s",
		s, s.src.stream, lostOnCrash(in.Config), durableFix(s.src.stream))
}

// durableFix says how to get a DLQ's entries into a stream whose deletes
// last (a stream's persist mode cannot be changed).
func durableFix(stream string) string {
	return fmt.Sprintf("Make a DLQ stream with file storage and the default persist mode (dlqctl import --init makes one), copy the entries there (dlqctl export, then dlqctl import), point the consumers at it, and purge %q (nats stream purge)", stream)
}

// durabilityCheck is doctor's line on the DLQ stream: what a crash of the
// server can undo there.
func (s *Stream) durabilityCheck(in *jetstream.StreamInfo) backend.DoctorCheck {
	name := "DLQ stream " + s.src.stream
	lost := lostOnCrash(in.Config)
	switch {
	case lost == "":
		return backend.DoctorCheck{Name: name, OK: true, Detail: "file storage, default persist mode: what a run removes stays removed after a crash of the server"}
	case in.Config.PersistMode == jetstream.AsyncPersistMode:
		return backend.DoctorCheck{Name: name, Detail: lost + ": redrive and resolve refuse it", Fix: durableFix(s.src.stream)}
	}
	return backend.DoctorCheck{Name: name, Detail: lost + ", dead letters included", Fix: durableFix(s.src.stream)}
}
