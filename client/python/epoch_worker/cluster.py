"""The cluster's endpoints and the few calls the worker makes: KV Range, Lease grant and revoke,
and epoch.v1.Jobs. One insecure channel per endpoint; a call starts at the endpoint that answered
last and moves on when one is unreachable (UNAVAILABLE), as the C++ client does. Any member
serves these calls (followers forward writes to the leader).

Cancellation: every call takes an optional `stop` (a Session); when the session is lost the call
in flight is cancelled (grpc.Future.cancel), the Python form of the C++ stop token.

Threading: thread-safe (gRPC channels and stubs are)."""
import grpc

from etcdserverpb import rpc_pb2, rpc_pb2_grpc
from epoch.v1 import epoch_pb2, epoch_pb2_grpc


class Cancelled(Exception):
    """The call was cancelled because the session was lost."""


class Cluster:
    def __init__(self, endpoints, call_timeout_s=3.0):
        if not endpoints:
            raise ValueError("no endpoints")
        self.endpoints = list(endpoints)
        self.call_timeout_s = call_timeout_s
        self._channels = [grpc.insecure_channel(e) for e in self.endpoints]
        self._preferred = 0

    def close(self):
        for channel in self._channels:
            channel.close()

    def channel(self, index):
        return self._channels[index % len(self._channels)]

    def _call(self, make_stub, method, request, stop=None, retry_unavailable=True):
        """Unary call on the preferred endpoint, then the others while they are unreachable."""
        last = None
        for i in range(len(self._channels)):
            index = (self._preferred + i) % len(self._channels)
            rpc = getattr(make_stub(self._channels[index]), method)
            future = rpc.future(request, timeout=self.call_timeout_s)
            try:
                if stop is None:
                    response = future.result()
                else:
                    with stop.cancel_on_lost(future.cancel):
                        response = future.result()
                self._preferred = index
                return response
            except grpc.FutureCancelledError as err:
                raise Cancelled(f"{method} cancelled: session lost") from err
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.CANCELLED and stop is not None and stop.lost():
                    raise Cancelled(f"{method} cancelled: session lost") from err
                if err.code() != grpc.StatusCode.UNAVAILABLE or not retry_unavailable:
                    raise
                last = err
        raise last

    def range_prefix(self, prefix, stop=None):
        end = bytearray(prefix)
        while end and end[-1] == 0xFF:
            end.pop()
        end[-1] += 1
        request = rpc_pb2.RangeRequest(key=prefix, range_end=bytes(end))
        return self._call(rpc_pb2_grpc.KVStub, "Range", request, stop).kvs

    def lease_grant(self, ttl_s):
        return self._call(rpc_pb2_grpc.LeaseStub, "LeaseGrant",
                          rpc_pb2.LeaseGrantRequest(TTL=ttl_s))

    def lease_revoke(self, lease_id):
        return self._call(rpc_pb2_grpc.LeaseStub, "LeaseRevoke",
                          rpc_pb2.LeaseRevokeRequest(ID=lease_id))

    def keepalive_stream(self, index, requests):
        """A LeaseKeepAlive stream on endpoint `index`, fed by the iterator `requests`."""
        return rpc_pb2_grpc.LeaseStub(self.channel(index)).LeaseKeepAlive(requests)

    # --- epoch.v1.Jobs -------------------------------------------------------------------------

    def acquire(self, prefix, job_id, lease_id, holder, max_epochs, stop):
        # Retry-safe: repeated by the same lease, the server answers the same token.
        request = epoch_pb2.JobAcquireRequest(prefix=prefix, job=job_id.encode(), lease=lease_id,
                                              holder=holder.encode(), max_epochs=max_epochs)
        return self._call(epoch_pb2_grpc.JobsStub, "Acquire", request, stop)

    def status(self, prefix, job_id, stop):
        request = epoch_pb2.JobStatusRequest(prefix=prefix, job=job_id.encode())
        return self._call(epoch_pb2_grpc.JobsStub, "Status", request, stop)

    def release(self, prefix, job_id, token, completed, stop):
        # Not retried on another member: a lost answer leaves the outcome unknown (see complete).
        request = epoch_pb2.JobReleaseRequest(prefix=prefix, job=job_id.encode(),
                                              fencing_token=token, completed=completed)
        return self._call(epoch_pb2_grpc.JobsStub, "Release", request, stop,
                          retry_unavailable=False)
