package redrive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A run-start record names its plan by digest and path instead of holding
// it: at a million entries the embedded plan was a 200 MB line that every
// reader of the journal decoded. Readers (status, resume, reconcile
// --journal) read the plan file and believe it only when it hashes to its
// digest and that digest is the one the run-start, signed, names. Journals
// of earlier versions embed the plan in their run-start; they are read as
// before.

// ErrRunPlan: the plan file a journal names is missing, unreadable, or not
// the run's plan (its digest differs). The journal alone no longer says
// what the run was to move, so nothing goes on from it.
var ErrRunPlan = errors.New("the run's plan file cannot be used")

// LoadRunPlan is the plan of the run whose run-start is start, in the
// journal at journalPath: the one the run-start embeds (journals of
// earlier versions), or else the plan file at planPath when given, else at
// the path the run-start recorded, else the file of that name next to the
// journal. A file is taken only when its content hashes to its digest and
// that digest is the run-start's; a missing or different file is an error
// wrapping ErrRunPlan. An embedded plan must verify against its digest
// (an error wrapping ErrTampered).
func LoadRunPlan(start Record, journalPath, planPath string) (*Plan, error) {
	if start.Plan != nil {
		if err := start.Plan.Verify(); err != nil {
			return nil, fmt.Errorf("journal %s: %w", journalPath, err)
		}
		return start.Plan, nil
	}
	if start.PlanDigest == "" {
		return nil, fmt.Errorf("journal %s: its run-start names no plan", journalPath)
	}
	var cands []string
	if planPath != "" {
		cands = []string{planPath}
	} else {
		if start.PlanPath != "" {
			cands = append(cands, start.PlanPath)
		}
		if next := filepath.Join(filepath.Dir(journalPath), filepath.Base(start.PlanPath)); start.PlanPath != "" && next != filepath.Clean(start.PlanPath) {
			cands = append(cands, next)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("journal %s: %w: the run-start records no plan path; give it with --plan", journalPath, ErrRunPlan)
	}
	var problems []string
	for _, path := range cands {
		p, err := ReadPlan(path)
		if errors.Is(err, os.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("%s does not exist", path))
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if err := p.Verify(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if p.Digest != start.PlanDigest {
			problems = append(problems, fmt.Sprintf("%s has digest %s, not the run's %s", path, short(p.Digest), short(start.PlanDigest)))
			continue
		}
		return p, nil
	}
	return nil, fmt.Errorf("journal %s: %w: %s (the journal names its plan by digest; give the run's plan file with --plan)", journalPath, ErrRunPlan, strings.Join(problems, "; "))
}

// startPlan is the plan a run-start stands for: the one it embeds, or
// given, which must be the plan it names.
func startPlan(r Record, given *Plan) (*Plan, error) {
	if r.Plan != nil {
		return r.Plan, nil
	}
	if given == nil {
		return nil, fmt.Errorf("%w: the run-start names its plan by digest %s, and no plan was given", ErrRunPlan, short(r.PlanDigest))
	}
	if given.Digest != r.PlanDigest {
		return nil, fmt.Errorf("%w: the plan's digest %s is not the run's %s", ErrRunPlan, short(given.Digest), short(r.PlanDigest))
	}
	return given, nil
}
