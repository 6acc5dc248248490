// Package sourcecheck holds tests that read dlqctl's own source: rules of
// the code base that no compiler or vet check holds (see its tests). It
// has no code of its own.
package sourcecheck
