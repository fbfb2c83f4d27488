package export

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The delivery path: records go to kgo without ever blocking the
// capture. kgo holds up to --export-buffer records in memory and retries
// them until the sink takes them (no delivery timeout: an outage of any
// length loses none of them; the idempotent producer keeps their order).
// Past the buffer, records spill to the spool on disk when there is one
// (--export-spool), read back in order once the sink takes records again;
// without a spool, or past its size, they are dropped and counted.

// DownAfter is how long the oldest record may wait before the sink is
// said to be down (when no connection failure said so first).
const DownAfter = 10 * time.Second

// delivery is the Exporter's state of the delivery path.
type delivery struct {
	spool    *spool
	spoolMu  sync.Mutex
	spilling atomic.Bool
	spooled  atomic.Int64 // records written to the spool, in all
	saved    atomic.Int64 // records put back into the spool at Close
	closing  atomic.Bool
	// agesMu guards ages: the records in kgo by the second they were
	// made (the oldest waiting).
	agesMu sync.Mutex
	ages   ages
	lastOK atomic.Int64 // Unix ns of the last record acknowledged
	stop   chan struct{}
	wg     sync.WaitGroup
	down   atomic.Bool
	// requeued are records kgo abandoned for a recreated topic, shipped
	// again once the topic is purged from the client (purging).
	requeueMu sync.Mutex
	requeued  []held
	purging   bool
	// notify says on stderr when the sink goes down and comes back.
	notify func(string)
}

// startDelivery opens the spool and starts its reader and the watch of
// the sink.
func (e *Exporter) startDelivery() error {
	e.stop = make(chan struct{})
	e.notify = e.cfg.Notify
	if e.cfg.SpoolDir != "" {
		sp, err := openSpool(e.cfg.SpoolDir, e.cfg.SpoolSize)
		if err != nil {
			return err
		}
		e.spool = sp
		if sp.records > 0 {
			e.spilling.Store(true)
			e.say(fmt.Sprintf("%d records an earlier run left in the spool %s are shipped first", sp.records, e.cfg.SpoolDir))
		}
		e.wg.Add(1)
		go e.drain()
	}
	e.wg.Add(1)
	go e.watch()
	return nil
}

func (e *Exporter) say(s string) {
	if e.notify != nil {
		e.notify(s)
	}
}

// connectHook keeps the last failure to reach the sink.
type connectHook struct{ e *Exporter }

func (h connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if err == nil {
		h.e.connErr.Store(nil)
		if conn != nil {
			h.e.own.addConn(conn.LocalAddr(), conn.RemoteAddr())
		}
		return
	}
	s := err.Error()
	h.e.connErr.Store(&s)
}

// delivered is kgo's promise for every record: counts, and the record
// back to the pool. At Close, with a spool, what the sink did not take
// goes back into the spool for the next run instead of failing.
func (e *Exporter) delivered(r *kgo.Record, err error) {
	e.inflight.Add(-1)
	e.agesMu.Lock()
	e.ages.remove(r.Timestamp.Unix())
	e.agesMu.Unlock()
	switch {
	case err == nil:
		e.sent.Add(1)
		e.lastOK.Store(time.Now().UnixNano())
		if r.Topic == e.cfg.FindingsTopic {
			e.findings.Add(1)
		}
	case errors.Is(err, kgo.ErrMaxBuffered) && e.spool != nil && !e.closing.Load():
		e.spill(r.Topic, r.Key, r.Value, r.Timestamp)
	case errors.Is(err, kgo.ErrMaxBuffered):
		e.dropped.Add(1)
	case (errors.Is(err, kerr.UnknownTopicID) || isPurged(err)) && !e.closing.Load():
		// kgo abandons what it holds for a topic whose id changed (the
		// topic recreated, the sink restarted empty) and keeps failing
		// the topic until it is purged from the client: purged, then
		// shipped again.
		e.requeue(r)
		return
	case e.closing.Load() && e.spool != nil && !isRefusal(err):
		e.spoolMu.Lock()
		ok := e.spool.put(r.Topic, r.Key, r.Value, r.Timestamp)
		e.spoolMu.Unlock()
		if ok {
			e.saved.Add(1)
		} else {
			e.failed.Add(1)
		}
	default:
		e.failed.Add(1)
		s := err.Error()
		e.lastErr.Store(&s)
	}
	buf := r.Value[:0]
	*r = kgo.Record{Value: buf}
	e.recs.Put(r)
}

// requeue keeps a record kgo abandoned for a recreated topic and, the
// first time, purges the topic from the client (kgo adopts the new id
// only so) and ships the records kept once the purge is done.
func (e *Exporter) requeue(r *kgo.Record) {
	topic := r.Topic
	e.requeueMu.Lock()
	e.requeued = append(e.requeued, held{topic: topic, kv: append(append([]byte(nil), r.Key...), r.Value...), k: len(r.Key), at: r.Timestamp})
	start := !e.purging
	e.purging = true
	e.requeueMu.Unlock()
	buf := r.Value[:0]
	*r = kgo.Record{Value: buf}
	e.recs.Put(r)
	if start {
		e.wg.Add(1)
		go e.purge(topic)
	}
}

// held is a record waiting to be shipped again.
type held struct {
	topic string
	kv    []byte
	k     int
	at    time.Time
}

func (e *Exporter) purge(topic string) {
	defer e.wg.Done()
	// kgo fails what it holds for the topic one partition at a time.
	select {
	case <-time.After(time.Second):
	case <-e.stop:
	}
	e.cl.PurgeTopicsFromProducing(topic)
	e.say(fmt.Sprintf("topic %s has a new id on the sink (recreated, or the sink restarted empty): its records are shipped to the new topic", topic))
	select {
	case <-time.After(500 * time.Millisecond): // the purge's promises
	case <-e.stop:
	}
	e.requeueMu.Lock()
	rs := e.requeued
	e.requeued, e.purging = nil, false
	e.requeueMu.Unlock()
	for _, h := range rs {
		e.produce(h.topic, h.kv[:h.k], h.kv[h.k:], h.at)
	}
}

func isPurged(err error) bool { return strings.Contains(err.Error(), "purged while buffered") }

// spill puts a record into the spool (kgo would not take it, or records
// spill), or drops and counts it when the spool is full.
func (e *Exporter) spill(topic string, key, value []byte, at time.Time) {
	e.spoolMu.Lock()
	ok := e.spool.put(topic, key, value, at)
	if ok {
		e.spilling.Store(true)
	}
	e.spoolMu.Unlock()
	if ok {
		e.spooled.Add(1)
	} else {
		e.dropped.Add(1)
	}
}

// isRefusal tells the sink's refusal of a record (too large, not
// authorized...), which no later try would change, from a failure to
// reach it.
func isRefusal(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable
}

// ship hands key and value (copied) to kgo without ever blocking: past
// the buffer's bound the record goes to the spool, or is dropped and
// counted without one.
func (e *Exporter) ship(topic string, key, value []byte) {
	at := time.Now()
	if e.spool != nil && (e.spilling.Load() || e.inflight.Load() >= e.limit.Load()) {
		// Once records spill, all do until the spool is read out: their
		// order is kept.
		e.spill(topic, key, value, at)
		return
	}
	if e.inflight.Load() >= e.limit.Load() {
		e.dropped.Add(1)
		return
	}
	e.produce(topic, key, value, at)
}

// produce gives kgo a copy of the record.
func (e *Exporter) produce(topic string, key, value []byte, at time.Time) {
	e.inflight.Add(1)
	e.agesMu.Lock()
	e.ages.add(at.Unix())
	e.agesMu.Unlock()
	r := e.recs.Get().(*kgo.Record)
	data := append(r.Value[:0], key...)
	data = append(data, value...)
	r.Key, r.Value = data[:len(key):len(key)], data[len(key):]
	r.Topic = topic
	r.Timestamp = at
	e.cl.TryProduce(context.Background(), r, e.promise)
}

// drain reads the spool back into kgo as room frees up (three quarters
// of the buffer), until it is empty; then records go to kgo directly
// again.
func (e *Exporter) drain() {
	defer e.wg.Done()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var fr frame
	var kv []byte
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		for e.spilling.Load() && e.inflight.Load() < e.limit.Load()*3/4 && !e.closing.Load() {
			e.spoolMu.Lock()
			at, ok := e.spool.next(&fr)
			if !ok {
				e.spilling.Store(false)
				e.spoolMu.Unlock()
				break
			}
			topic := string(fr.topic)
			kv = append(append(kv[:0], fr.key...), fr.value...)
			k := len(fr.key)
			e.spoolMu.Unlock()
			e.produce(topic, kv[:k], kv[k:], at)
		}
	}
}

// Waiting is what waits for the sink: records in memory and in the
// spool, and the time the oldest was made (zero if none).
func (e *Exporter) waiting() (records, spooled, spoolBytes int64, oldest time.Time) {
	records = e.inflight.Load()
	e.agesMu.Lock()
	sec := e.ages.oldest()
	e.agesMu.Unlock()
	e.requeueMu.Lock()
	records += int64(len(e.requeued))
	for _, h := range e.requeued {
		if sec == 0 || h.at.Unix() < sec {
			sec = h.at.Unix()
		}
	}
	e.requeueMu.Unlock()
	if e.spool != nil {
		e.spoolMu.Lock()
		spooled, spoolBytes = e.spool.records, e.spool.bytes
		if s := e.spool.oldest(); s != 0 && (sec == 0 || s < sec) {
			sec = s
		}
		e.spoolMu.Unlock()
	}
	if sec != 0 {
		oldest = time.Unix(sec, 0)
	}
	return records + spooled, spooled, spoolBytes, oldest
}

// watch says on stderr when the sink goes down (a connection to it
// failed, or the oldest record has waited DownAfter), every minute while
// it stays down, and when it comes back.
func (e *Exporter) watch() {
	defer e.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var since, told time.Time
	var droppedAt int64
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			n, spooled, _, oldest := e.waiting()
			conn := e.connErr.Load()
			// Down: a connection to the sink failed, or records have
			// waited DownAfter with none acknowledged meanwhile (a
			// backlog being taken is not an outage).
			lastOK := time.Unix(0, e.lastOK.Load())
			stalled := !oldest.IsZero() && now.Sub(oldest) >= DownAfter && now.Sub(lastOK) >= DownAfter
			down := n > 0 && (conn != nil || stalled)
			switch {
			case down && !e.down.Load():
				e.down.Store(true)
				since, told, droppedAt = now, now, e.dropped.Load()
				why := "no acknowledgement for " + now.Sub(oldest).Round(time.Second).String()
				if conn != nil {
					why = *conn
				}
				e.say(fmt.Sprintf("the sink %s is not taking records: %d waiting, the oldest %s; %s (%s)",
					e.sink, n, ageOf(now, oldest), e.whereTheRestGoes(), why))
			case down && now.Sub(told) >= time.Minute:
				told = now
				e.say(fmt.Sprintf("the sink still down after %s: %d records waiting (%d in the spool), the oldest %s, %d dropped",
					now.Sub(since).Round(time.Second), n, spooled, ageOf(now, oldest), e.dropped.Load()-droppedAt))
			case !down && e.down.Load() && lastOK.After(since):
				e.down.Store(false)
				e.say(fmt.Sprintf("the sink %s is back after %s: %d records waiting, %d dropped while it was down",
					e.sink, now.Sub(since).Round(time.Second), n, e.dropped.Load()-droppedAt))
			}
		}
	}
}

func ageOf(now, t time.Time) string {
	if t.IsZero() {
		return "0s"
	}
	return now.Sub(t).Round(time.Second).String()
}

func (e *Exporter) whereTheRestGoes() string {
	if e.spool != nil {
		return fmt.Sprintf("past %d in memory they go to the spool %s (up to %s)", e.limit.Load(), e.cfg.SpoolDir, sizeString(e.cfg.SpoolSize))
	}
	return fmt.Sprintf("past %d (--export-buffer) they are dropped; --export-spool DIR keeps them on disk", e.limit.Load())
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Stats returns the counts so far.
func (e *Exporter) Stats() Stats {
	s := Stats{
		Sink: e.sink, Topic: e.cfg.Topic, FindingsTopic: e.cfg.FindingsTopic,
		Records: e.sent.Load(), Findings: e.findings.Load(),
		Dropped: e.dropped.Load(), Failed: e.failed.Load(), Spilled: e.spooled.Load(), Saved: e.saved.Load(),
		SpoolDir: e.cfg.SpoolDir, Up: !e.down.Load(),
	}
	var oldest time.Time
	s.Pending, s.Spooled, s.SpoolBytes, oldest = e.waiting()
	if !oldest.IsZero() {
		s.Oldest = time.Since(oldest)
	}
	if e.spool != nil {
		e.spoolMu.Lock()
		s.Failed += e.spool.lost
		e.spoolMu.Unlock()
	}
	if p := e.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	if p := e.connErr.Load(); p != nil {
		// Records waiting for an unreachable sink fail as "client
		// closed" at the end: the reason is the connection's.
		s.LastError = "sink unreachable: " + *p
	}
	return s
}

// Dropped is what did not reach the sink so far (dropped and failed): the
// number the status line shows.
func (e *Exporter) Dropped() int64 { return e.dropped.Load() + e.failed.Load() }

// Reach asks the sink for its metadata of the topics, until ctx ends: an
// error (one line, saying what to do) when it never answered, when a
// topic does not exist and is not created, or when this client may not
// write to it.
func (e *Exporter) Reach(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, t := range []string{e.cfg.Topic, e.cfg.FindingsTopic} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	for {
		resp, err := req.RequestWith(ctx, e.cl)
		if isRefusal(err) {
			// Credentials refused, not authorized: no later try helps.
			return fmt.Errorf("the sink %s: %v", e.sink, err)
		}
		if err != nil {
			// Tried again until ctx ends: a sink starting with us.
			why := err.Error()
			if p := e.connErr.Load(); p != nil {
				why = *p
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the sink %s did not answer (%s)", e.sink, why)
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		again := false
		for _, t := range resp.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			switch err := kerr.ErrorForCode(t.ErrorCode); {
			case err == nil:
			case errors.Is(err, kerr.LeaderNotAvailable):
				again = true // being created
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				return fmt.Errorf("the sink %s has no topic %q and does not create topics: create it (docs/export.md, Deploying)", e.sink, name)
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				return fmt.Errorf("the sink %s does not let this client write to %q: grant it WRITE and DESCRIBE on the topic (docs/export.md, Deploying)", e.sink, name)
			default:
				return fmt.Errorf("the sink %s: topic %q: %v", e.sink, name, err)
			}
		}
		if !again {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sink %s did not make the topics ready (%s)", e.sink, strings.Join([]string{e.cfg.Topic, e.cfg.FindingsTopic}, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close waits up to the flush timeout for what is buffered (and spooled)
// to be delivered, then closes the client and returns the final counts.
// Without a spool, what is still waiting then fails and is counted; with
// one, it is put back into the spool for the next run (Stats.Saved).
func (e *Exporter) Close() Stats { return e.CloseAbort(nil) }

// CloseAbort is Close cut short when abort is closed (kfsniff closes it on
// a second Ctrl-C).
func (e *Exporter) CloseAbort(abort <-chan struct{}) Stats {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
		aborted := false
		if abort != nil {
			stopped := make(chan struct{})
			defer close(stopped)
			go func() {
				select {
				case <-abort:
					cancel()
				case <-stopped:
				}
			}()
		}
		done := make(chan error, 1)
		go func() {
			// The spool is read out by drain; then kgo flushes.
			for e.spilling.Load() {
				select {
				case <-ctx.Done():
					done <- ctx.Err()
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			done <- e.cl.Flush(ctx)
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Second):
			if e.cfg.Waiting != nil && e.cfg.FlushTimeout > time.Second {
				n, _, _, _ := e.waiting()
				e.cfg.Waiting(n, e.cfg.FlushTimeout-time.Second)
			}
			err = <-done
		}
		if abort != nil {
			select {
			case <-abort:
				aborted = true
			default:
			}
		}
		cancel()
		e.closing.Store(true)
		close(e.stop)
		e.wg.Wait()
		e.cl.Close() // fails what is left, its promises on kgo's goroutine
		for wait := time.Now().Add(5 * time.Second); e.inflight.Load() > 0 && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := e.inflight.Swap(0); n > 0 {
			e.failed.Add(n) // promises never called: not delivered
		}
		e.requeueMu.Lock()
		e.spoolMu.Lock()
		for _, h := range e.requeued {
			if e.spool != nil && e.spool.put(h.topic, h.kv[:h.k], h.kv[h.k:], h.at) {
				e.saved.Add(1)
			} else {
				e.failed.Add(1)
			}
		}
		e.requeued = nil
		e.spoolMu.Unlock()
		e.requeueMu.Unlock()
		if e.spool != nil {
			e.spoolMu.Lock()
			if cerr := e.spool.close(); cerr != nil {
				s := "spool: " + cerr.Error()
				e.lastErr.Store(&s)
			}
			e.spoolMu.Unlock()
		}
		e.closeStats = e.Stats()
		e.closeStats.Pending = 0
		if aborted && err != nil {
			e.closeStats.LastError = "flush cut short by Ctrl-C"
		} else if err != nil && e.closeStats.LastError == "" {
			e.closeStats.LastError = "not delivered before the flush timeout (" + e.cfg.FlushTimeout.String() + ")"
		}
	})
	return e.closeStats
}
