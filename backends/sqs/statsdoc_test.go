package sqsdlq_test

import (
	"testing"

	"github.com/dlqctl/dlqctl/backend/backendtest"
	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
)

// TestStatsFieldsMatchTheDocs pins the SQS section of stats' JSON
// (sqsdlq.SQSExtras) to its table in docs/json.md.
func TestStatsFieldsMatchTheDocs(t *testing.T) {
	backendtest.StatsDocMatches(t, "../../docs/json.md", "SQS", sqsdlq.SQSExtras{})
}
