// Package tlsconf turns a node's TLS files (certificate, key and the CA
// that vouches for its peers) into the tls.Config of each path: the HTTP
// listeners, the node-to-node HTTP client and the embedded NATS server's
// routes and gateways. The certificate and key are read again when they
// change on disk, so a renewed certificate is served without a restart.
package tlsconf
