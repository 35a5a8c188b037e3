/* config_layout.c - print tide_config's layout as this compiler lays it
 * out, as JSON: {"size": N, "fields": {"rank": [offset, size], ...}}.
 * The Python package mirrors tide_config field for field (ctypes); its
 * tests compare that mirror with this, so a field added here and not
 * there fails a test instead of letting tide_config_default write past
 * the end of a Python-owned struct. */
#include <stddef.h>
#include <stdio.h>

#include "tide.h"

#define FIELD(name) {#name, offsetof(tide_config, name), sizeof(((tide_config *)0)->name)}

static const struct {
    const char *name;
    size_t offset, size;
} fields[] = {
    FIELD(rank),         FIELD(size),          FIELD(local_rank),          FIELD(local_size),
    FIELD(master_addr),  FIELD(master_port),   FIELD(job_token),           FIELD(timeout_s),
    FIELD(bootstrap_timeout_s), FIELD(progress), FIELD(spin_us),          FIELD(log_level),
    FIELD(trace_path),   FIELD(yield_when_idle), FIELD(tcp_congestion),   FIELD(reactor),
    FIELD(transport),    FIELD(progress_cpus),     FIELD(wire_auth),
};

int main(void)
{
    printf("{\"size\": %zu, \"fields\": {", sizeof(tide_config));
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        printf("%s\"%s\": [%zu, %zu]", i ? ", " : "", fields[i].name, fields[i].offset,
               fields[i].size);
    printf("}}\n");
    return 0;
}
