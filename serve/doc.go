// Package serve answers queries for the model a service serves
// ([Current]: the newest version, or the one an operator pinned).
//
//   - [Service] is a NATS micro service "streamkpca" with the endpoints
//     <prefix>.<model>.snapshot, .project, .info and (nats.allow_pin)
//     .pin.
//   - [HTTPHandler] serves /v1/models/<model>, .../snapshot, .../project
//     and the versions and pin routes; its contract is openapi.yaml
//     ([OpenAPI]), against which a test validates real requests and
//     answers. [Listen] serves it with a bearer token, TLS and time
//     limits.
//
// Every answer names the version it was computed with.
package serve
