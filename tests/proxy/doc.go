// Package proxy is a cuttable TCP proxy for tests: put one in front of a
// node and cut it off the network (nothing passes, nothing is closed, new
// connections are accepted and hang), heal it, or reset every connection.
//
// It is for tests on loopback only; it is not a production proxy.
package proxy
