// Package transport carries a cluster's steps over core NATS: a
// generation's members find each other on a roster subject ([Roster])
// and exchange each step's payloads in rounds ([Exchange]: all-gather and
// all-to-all, chunked, with a timeout that names the members who did not
// answer). package cluster's Member steps through an Exchange as its
// Gatherer; it holds no state between generations.
package transport
