// Package configs is streamkpca's configuration: the struct with its
// defaults, YAML loading, STREAMKPCA_* environment overrides and Validate.
//
// # Precedence
//
// Defaults < YAML file < environment < command-line flags. An environment
// variable names a field by its YAML path in upper case with '_' between
// levels: learner.k is STREAMKPCA_LEARNER_K, kafka.brokers is
// STREAMKPCA_KAFKA_BROKERS (comma-separated for lists), snapshot.every is
// STREAMKPCA_SNAPSHOT_EVERY (a Go duration such as 30s). On the command
// line, `streamkpca run --set learner.k=5 --set kafka.brokers=a:9092,b:9092`
// names fields by their YAML paths.
//
// Secrets (passwords, tokens) may come from files (*_file fields) so that
// they need not sit in the YAML; they are never logged.
package configs
