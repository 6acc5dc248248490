package kafkae2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
)

// txnDiag describes the transactions around a DLT: the producers with an
// open transaction on its state topic, and what the coordinator says of
// dlqctl's transactional ID. A failing crash test prints it.
func txnDiag(t *testing.T, ctx context.Context, dlt string) string {
	t.Helper()
	adm := kadm.NewClient(client(t))
	var b strings.Builder
	state := dlt + ".dlqctl-state"
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{state: {0: {}}})
	fmt.Fprintf(&b, "describe producers (err %v):\n", err)
	ps.EachProducer(func(p kadm.DescribedProducer) {
		fmt.Fprintf(&b, "  %s/%d producer %d epoch %d seq %d coord-epoch %d txn-start %d\n",
			p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence, p.CoordinatorEpoch, p.CurrentTxnStartOffset)
	})
	ts, err := adm.DescribeTransactions(ctx, kafkadlq.TransactionalID(dlt))
	fmt.Fprintf(&b, "describe transactions (err %v):\n", err)
	for _, d := range ts {
		fmt.Fprintf(&b, "  %s state %s producer %d epoch %d started %d topics %v err %v\n",
			d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, d.StartTimestamp, d.Topics, d.Err)
	}
	lo, err := adm.ListEndOffsets(ctx, state)
	fmt.Fprintf(&b, "end offsets %v (err %v)\n", lo, err)
	return b.String()
}
