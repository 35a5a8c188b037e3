/* ulfm_step.c - see ulfm_step.h. */
#include "ulfm_step.h"

int ulfm_after_step(tide_comm **comm, tide_comm *world, int rc)
{
    if (rc)
        tide_comm_revoke(*comm); /* wake the ranks still waiting on it */
    int flag = rc == 0;
    if ((rc = tide_comm_agree(*comm, &flag)) != 0)
        return rc;
    if (flag)
        return 1;
    tide_comm *smaller = NULL;
    if ((rc = tide_comm_shrink(*comm, &smaller)) != 0)
        return rc;
    if (*comm != world)
        tide_comm_free(*comm);
    *comm = smaller;
    return 0;
}
