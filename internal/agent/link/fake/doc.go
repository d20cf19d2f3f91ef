// Package fake is an in-memory server for the agent's link: it
// implements link.Uplink the way a real server must (atomic batches,
// records applied once by sequence number), can be partitioned or made to
// lose its replies, and records what it received for tests to check.
//
// Package fake must not import the agent's other packages; tests of all
// of them use it.
package fake
