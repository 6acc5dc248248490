package rabbitmq_test

import (
	"testing"

	"github.com/dlqctl/dlqctl/backend/backendtest"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
)

// TestStatsFieldsMatchTheDocs pins the RabbitMQ section of stats' JSON
// (rabbitmq.Stats) to its table in docs/json.md.
func TestStatsFieldsMatchTheDocs(t *testing.T) {
	backendtest.StatsDocMatches(t, "../../docs/json.md", "RabbitMQ", rabbitmq.Stats{})
}
