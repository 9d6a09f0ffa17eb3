package engine

// AgHostEagerMax is agHostEagerMax, for the external tests.
const AgHostEagerMax = agHostEagerMax
