// Package spool is the agent's outbox on disk: samples and job events
// wait here, numbered, until the server has them, and survive the agent's
// restart.
//
// # Layout
//
// A directory of segment files, seg-<first seq>.log, each at most
// SegmentRecords records, one per line as "<crc32c hex> <json>\n", and a
// state file holding the highest sequence number acknowledged by the
// server and the highest handed out to be sent. A segment whose records
// are all acknowledged is deleted.
//
// # Durability
//
// Every Append is one write(2) of a whole line straight to the file (no
// user-space buffer), so a crash of the agent process loses nothing that
// Append returned. Against a crash of the machine, fsync policy decides:
// SyncBatch (the default) fsyncs a segment when it is sealed, after every
// job event (an exit status is worth an fsync), on Sync and on Close;
// SyncAlways fsyncs after every record. The state file is replaced
// atomically (write, fsync, rename, fsync the directory) whenever it
// changes. On Open, a torn or corrupt tail is cut off at the last whole
// record: what survives is always a prefix of what was appended.
//
// # Bound
//
// At most MaxRecords records are kept. Beyond it the oldest segments are
// compacted: their samples are replaced by one Summary record (per
// device: count, min/mean/max utilization and memory) in their place in
// the order, while their events are kept as they are — an exit status is
// never summarised. Records already handed to the link by Peek are never
// summarised, so no sample is both sent and summarised. Only events and
// summaries can push the spool past its bound, and only when they alone
// fill it.
//
// Package spool imports the link's record types and nothing else of the
// agent, and no decision package.
package spool
