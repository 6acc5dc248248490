package kafkadlq

// claimRecord binds a DLT to the state topic that records what was taken
// out of it: the first claim in the DLT's well-known place wins.
type claimRecord struct {
	DLT        string `json:"dlt"`
	StateTopic string `json:"state_topic"`

	offset int64
}
