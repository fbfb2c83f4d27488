package replicadivergence

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is the copies of a partition's batches on one connection that
// differ from the leader's, both verifying their CRC: the replicas hold
// different data at one offset. Its exported fields are the finding's
// "fields"; the first batch that differs is the one described. Path is
// how the differing copy travelled (produce, consumer-fetch,
// replica-fetch, raft-fetch); the node ids and leader epochs are there
// when known.
type Finding struct {
	Topic              string `json:"topic"`
	Partition          int32  `json:"partition"`
	BaseOffset         int64  `json:"base_offset"`
	ClientID           string `json:"client_id"`
	Path               string `json:"path"`
	CRCLeader          int64  `json:"crc_leader"`
	CRCReplica         int64  `json:"crc_replica"`
	LeaderID           *int32 `json:"leader_id,omitempty"`            // served the leader's copy
	ReplicaID          *int32 `json:"replica_id,omitempty"`           // holds the other, if another node
	LeaderEpochLeader  *int32 `json:"leader_epoch_leader,omitempty"`  // both copies fetched from a broker:
	LeaderEpochReplica *int32 `json:"leader_epoch_replica,omitempty"` // their partition leader epochs

	Label  string
	Holder int32 // the node holding the other copy, -1 if unknown
	// CRCs is the different CRCs seen at the offset; Batches the
	// batches of the partition that differ so on the connection.
	CRCs    int   `count:"crcs"`
	Batches int64 `count:"batches"`

	RefCopies   int64
	RefPaths    uint8
	EpochChange int64
	// consumedLost: of them, batches whose replaced copy a consumer read.
	ConsumedLost int64
	Epochs       [2]int32 // of the first batch's copies: the leader's, the other's
	Leader       string   // the leader's server
	Server       string   // the server of the other copy
	Who          string   // the holder of the other copy
	Client       string
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	if f.Holder >= 0 && (f.Path == copies.ReplicaFetch.String() || f.Path == copies.RaftFetch.String()) {
		return fmt.Sprintf("%s offset %d: node %d's copy (%s) has crc %d, the leader's %d", f.Label, f.BaseOffset, f.Holder, f.ClientID, f.CRCReplica, f.CRCLeader)
	}
	return fmt.Sprintf("%s offset %d: %s's copy has crc %d, the leader's %d", f.Label, f.BaseOffset, f.ClientID, f.CRCReplica, f.CRCLeader)
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var ex strings.Builder
	other := fmt.Sprintf("the copy %s sent to %s by %s", f.Server, f.Who, f.Path)
	if f.Path == copies.Produce.String() {
		other = fmt.Sprintf("the copy producer %s (%s) wrote to %s", f.ClientID, f.Client, f.Server)
	}
	fmt.Fprintf(&ex, "At offset %d of %s, %d different batches were seen. The leader, %s, has CRC %d in %s (%s); %s has CRC %d. ",
		f.BaseOffset, f.Label, f.CRCs, f.Leader, f.CRCLeader, text.Plural(f.RefCopies, "copy", "copies"), pathNames(f.RefPaths), other, f.CRCReplica)
	ex.WriteString("Both CRCs verify, so each copy is intact as it was sent: the replicas hold different data at one offset, and a consumer sees different records depending on the replica it reads.")
	if f.Batches > 1 {
		fmt.Fprintf(&ex, " %d batches of this partition differ this way on this connection, the first at offset %d.", f.Batches, f.BaseOffset)
	}
	if f.EpochChange > 0 {
		fmt.Fprintf(&ex, " The copies carry different partition leader epochs (%d and %d): the log at this offset was rewritten after a leader change, which is how uncommitted data is truncated and replaced; with acks=1 producers the replaced copy had been acknowledged and is lost.", f.Epochs[0], f.Epochs[1])
		if f.ConsumedLost > 0 {
			fmt.Fprintf(&ex, " A consumer had read the replaced copy of %s: it was below the high watermark, committed, so the change lost committed data (an unclean leader election, or a broker that lost its log).",
				text.Plural(f.ConsumedLost, "batch", "batches"))
		}
	}
	return ex.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("Compare the segment on both brokers: kafka-dump-log.sh --files <segment>.log --print-data-log | grep -A2 'baseOffset: %d' on %s and on %s. "+
		"Check unclean.leader.election.enable and the controller log for unclean elections, the partition's leader epochs "+
		"(kafka-topics.sh --describe, the leader-epoch-checkpoint files), and disk or memory errors on both hosts (dmesg, SMART).",
		f.BaseOffset, f.Leader, f.Who)
}

func (r *rule) mismatchFinding(p *detectors.Pass, m *mismatch) detectors.Finding {
	src, ref := r.srcs.Get(m.src), r.srcs.Get(m.ref)
	leader := ref.ServerNode(p.Nodes)
	nodes := tally.IDs{}
	nodes.Add(leader)
	nodes.Add(src.ServerNode(p.Nodes))
	holder := src.HolderNode(p.Nodes)
	nodes.Add(holder)
	f := &Finding{
		Topic: m.part.key.TopicName(p.Nodes), Partition: m.part.key.Num, BaseOffset: m.base, ClientID: src.ClientID,
		CRCLeader: int64(m.crcLeader), CRCReplica: int64(m.crcReplica), Path: src.Path.String(),
		Label: m.part.key.Label(p.Nodes), Holder: holder, CRCs: m.crcs, Batches: m.batches, RefCopies: m.refCopies,
		RefPaths: m.refPaths, EpochChange: m.epochChange, ConsumedLost: m.consumedLost, Epochs: [2]int32{m.epochLeader, m.epochRepl}, Leader: ref.ServerLabel(p.Nodes), Server: src.ServerLabel(p.Nodes),
		Who: src.HolderLabel(p.Nodes), Client: src.Client.String(),
	}
	if leader >= 0 {
		f.LeaderID = &leader
	}
	if holder >= 0 && holder != leader {
		f.ReplicaID = &holder
	}
	if m.epochLeader >= 0 && m.epochRepl >= 0 {
		f.LeaderEpochLeader, f.LeaderEpochReplica = &m.epochLeader, &m.epochRepl
	}
	// Replicas holding different data at one offset do not heal: an
	// error, however short the capture. A copy replaced after a leader
	// change is the log truncating what was not yet committed (a
	// follower may have fetched it, a producer with acks=1 been told it
	// was written): a warning; but if a consumer had read the replaced
	// copy, it was committed, and replacing it lost data: an error.
	sev := detectors.Error
	if m.epochChange == m.batches && m.consumedLost == 0 {
		sev = detectors.Warning
	}
	return detectors.Finding{
		Severity: sev, First: m.when.First, Last: m.when.Last, Conns: m.conns.Ints(), Nodes: nodes.Sorted(),
		Evidence: m.ev.List(),
		Subject:  detectors.Subject{ClientIDs: []string{src.ClientID}, Nodes: nodes.Sorted(), Partitions: []cluster.Partition{{Topic: f.Topic, Num: f.Partition}}},
		Detail:   f,
	}
}

// BadCRC is the copies of a partition's batches on one connection whose
// CRC does not verify: damaged before the broker, on disk or in transit.
// Its exported fields are the finding's "fields", of the first such copy.
type BadCRC struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	BaseOffset int64  `json:"base_offset"` // -1: refused or not answered
	ClientID   string `json:"client_id"`
	CRC        int64  `json:"crc"`
	// CRCComputed is the checksum of the copy's bytes as they are.
	CRCComputed int64  `json:"crc_computed"`
	CRCValid    bool   `json:"crc_valid"`
	Path        string `json:"path"`
	// Error is the broker's refusal of a produced batch, if any.
	Error string `json:"error,omitempty"`

	Label string
	Code  int16
	// Copies is the copies on the connection that fail the check.
	Copies int64 `count:"bad_crcs"`

	Server string
	Holder string
}

// at says where the copy is in the log.
func (b *BadCRC) at() string {
	switch {
	case b.BaseOffset < 0 && b.Code != 0:
		return "(no offset: refused)"
	case b.BaseOffset < 0:
		return "(offset unknown: no response)"
	}
	return "at offset " + strconv.FormatInt(b.BaseOffset, 10)
}

// Summary implements detectors.Detail.
func (b *BadCRC) Summary() string {
	if b.Path == copies.Produce.String() {
		return fmt.Sprintf("%s: producer %s sent a batch whose CRC does not verify (crc %d, computed %d)", b.Label, b.ClientID, b.CRC, b.CRCComputed)
	}
	return fmt.Sprintf("%s %s: the batch %s sent to %s fails its CRC (crc %d, computed %d)", b.Label, b.at(), b.Server, b.ClientID, b.CRC, b.CRCComputed)
}

// Explanation implements detectors.Detail.
func (b *BadCRC) Explanation() string {
	var ex strings.Builder
	if b.Path == copies.Produce.String() {
		fmt.Fprintf(&ex, "A batch for %s from %s carries CRC %d in its header, but its bytes (attributes to the end) checksum to %d: it was damaged before it reached the broker %s. ",
			b.Label, b.Holder, b.CRC, b.CRCComputed, b.Server)
		if b.Code != 0 {
			fmt.Fprintf(&ex, "The broker refused it with %s. ", b.Error)
		} else if b.BaseOffset >= 0 {
			fmt.Fprintf(&ex, "The broker still appended it %s. ", b.at())
		}
	} else {
		fmt.Fprintf(&ex, "The batch %s of %s that %s sent to %s by %s carries CRC %d in its header, but its bytes (attributes to the end) checksum to %d: this copy is corrupt. ",
			b.at(), b.Label, b.Server, b.Holder, b.Path, b.CRC, b.CRCComputed)
		ex.WriteString("A follower or consumer that receives it rejects it (CorruptRecordException) and fetches it again, so it stalls at that offset as long as the broker serves these bytes. ")
	}
	if b.Copies > 1 {
		fmt.Fprintf(&ex, "%d copies on this connection failed the check.", b.Copies)
	}
	return strings.TrimSpace(ex.String())
}

// Next implements detectors.Detail.
func (b *BadCRC) Next() string {
	return "Run kafka-dump-log.sh --deep-iteration --files <segment>.log on " + b.Server +
		" around the offset: a stored batch that fails there is corrupt on disk (check dmesg, SMART, the page cache's host); " +
		"one that verifies was damaged in transit (NIC offload, memory, a proxy in the path). Check the receiver's log for " +
		"CorruptRecordException, and rule out the capture itself (a rewriting or TLS-terminating proxy at the capture point)."
}

func (r *rule) badFinding(p *detectors.Pass, b *badCopies) detectors.Finding {
	src := r.srcs.Get(b.src)
	nodes := tally.IDs{}
	nodes.Add(src.ServerNode(p.Nodes))
	nodes.Add(src.HolderNode(p.Nodes))
	f := &BadCRC{
		Topic: b.part.key.TopicName(p.Nodes), Partition: b.part.key.Num, BaseOffset: b.base, ClientID: src.ClientID,
		CRC: int64(b.crc), CRCComputed: int64(b.computed), Path: src.Path.String(),
		Label: b.part.key.Label(p.Nodes), Code: b.code, Copies: b.copies, Server: src.ServerLabel(p.Nodes), Holder: src.HolderLabel(p.Nodes),
	}
	if b.code != 0 {
		f.Error = decode.ErrorName(b.code)
	}
	return detectors.Finding{
		Severity: detectors.Error, First: b.when.First, Last: b.when.Last, Conns: []int{src.Conn}, Nodes: nodes.Sorted(),
		Evidence: b.ev.List(),
		Subject: detectors.Subject{ClientIDs: []string{src.ClientID}, Nodes: nodes.Sorted(), Error: b.code,
			Partitions: []cluster.Partition{{Topic: f.Topic, Num: f.Partition}}},
		Detail: f,
	}
}

// pathNames lists the paths in a bit set of copies.Path.
func pathNames(bits uint8) string {
	var out []string
	for p := copies.Produce; p <= copies.RaftFetch; p++ {
		if bits&(1<<p) != 0 {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ", ")
}

// holders resolves the copies' sources to replicas: node ids where known,
// else addresses.
func (r *rule) holders(n *cluster.Nodes, p *part, nodes tally.IDs, names map[string]bool) {
	for i := range p.holders.All() {
		s := r.srcs.Get(i)
		if id := s.ServerNode(n); id >= 0 {
			nodes.Add(id)
			names["node "+strconv.Itoa(int(id))] = true
		} else {
			names[s.Server.String()] = true
		}
		if s.Path.Replicated() {
			if id := s.HolderNode(n); id >= 0 {
				nodes.Add(id)
				names["node "+strconv.Itoa(int(id))] = true
			} else {
				names[s.Client.Addr().String()] = true
			}
		}
	}
}
