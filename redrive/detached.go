package redrive

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/dlqctl/dlqctl/internal/atomicfile"
)

// DetachedSchema names an approval handed over as its own file.
const DetachedSchema = "dlqctl.approval/v1"

// Detached is an approval written beside a plan instead of into it
// (approve --detach), so that approvers need not share the plan file:
// PLAN.approval-NAME, small enough to paste into a ticket.
type Detached struct {
	Schema     string   `json:"schema"`
	PlanDigest string   `json:"plan_digest"`
	Approval   Approval `json:"approval"`
	// Path is where it was read from.
	Path string `json:"-"`
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._@+-]`)

// DetachedPath is where an approval by `by` of the plan at planPath goes.
func DetachedPath(planPath, by string) string {
	return planPath + ".approval-" + unsafeName.ReplaceAllString(by, "_")
}

// WriteDetached writes a as PLAN.approval-NAME and returns the path. A
// file there already (an earlier approval by the same approver) is
// replaced.
func WriteDetached(planPath string, p *Plan, a Approval) (string, error) {
	path := DetachedPath(planPath, a.By)
	b, err := json.MarshalIndent(Detached{Schema: DetachedSchema, PlanDigest: p.Digest, Approval: a}, "", "  ")
	if err != nil {
		return "", err
	}
	return path, atomicfile.Write(path, append(b, '\n'), 0o600)
}

// ReadDetached reads every PLAN.approval-* beside the plan at planPath, in
// name order. Whether each is valid (for this plan, by a listed signer, in
// force) is for the approval policy to say; a file that is not an approval
// at all is an error naming it.
func ReadDetached(planPath string) ([]Detached, error) {
	pattern := escapeGlob(planPath) + ".approval-*"
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []Detached
	for _, path := range paths {
		if strings.HasPrefix(filepath.Base(path), ".") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var d Detached
		if err := json.Unmarshal(b, &d); err != nil || d.Schema != DetachedSchema {
			return nil, fmt.Errorf("%s: not a %s document (an approval written by approve --detach)", path, DetachedSchema)
		}
		d.Path = path
		out = append(out, d)
	}
	return out, nil
}

func escapeGlob(s string) string {
	return regexp.MustCompile(`[*?\[\\]`).ReplaceAllString(s, `\$0`)
}
