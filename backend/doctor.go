package backend

import "context"

// DoctorChecker is implemented by backends with checks of their own for
// dlqctl doctor, about what the DLQ depends on beyond its origins (a
// consumer whose dead letters it captures, say).
type DoctorChecker interface {
	DoctorChecks(ctx context.Context) []DoctorCheck
}

// DoctorCheck is one doctor line: its name, whether it passed, what was
// found, and the fix when it did not.
type DoctorCheck struct {
	Name        string
	OK          bool
	Detail, Fix string
}
