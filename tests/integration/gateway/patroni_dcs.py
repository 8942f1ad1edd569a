#!/usr/bin/python3
"""Patroni's etcd3 DCS (Debian's patroni, which speaks only etcd's HTTP/JSON gateway) against
the endpoints given: two members race for the leader key, exactly one wins, the loser sees the
winner, the leader's lease expires when it stops refreshing and the other member takes over.

Usage: patroni_dcs.py host:port[,host:port...]   exits 0 when every step held."""
import sys
import time

from patroni.dcs.etcd3 import Etcd3

TTL = 10  # Patroni's leader-key TTL, seconds


def member(hosts, name):
    return Etcd3({'hosts': hosts, 'scope': 'gateway-test', 'name': name, 'ttl': TTL,
                  'retry_timeout': 5, 'loop_wait': 2, 'namespace': '/service/'})


def main(hosts):
    a, b = member(hosts, 'a'), member(hosts, 'b')
    a.get_cluster()
    assert a.initialize(create_new=True, sysid='7000000000000000001'), 'initialize'
    assert a.attempt_to_acquire_leader(), 'a takes the leader key'
    assert not b.attempt_to_acquire_leader(), 'b must not take a held leader key'
    a.touch_member({'conn_url': 'postgres://a', 'api_url': 'http://a', 'state': 'running',
                    'role': 'master'})
    b.touch_member({'conn_url': 'postgres://b', 'api_url': 'http://b', 'state': 'running',
                    'role': 'replica'})
    deadline = time.time() + 10
    while True:
        cluster = b.get_cluster()
        members = sorted(m.name for m in cluster.members)
        if cluster.leader and cluster.leader.name == 'a' and members == ['a', 'b']:
            break
        assert time.time() < deadline, f'b sees leader a and both members: {cluster}'
        time.sleep(0.2)
    assert cluster.initialize == '7000000000000000001', 'initialize key'
    a.get_cluster()
    assert a.update_leader(None), 'a refreshes its leader lease'
    # a stops refreshing (a dead primary): b takes over once the lease expires, not before.
    start = time.time()
    while not b.attempt_to_acquire_leader():
        assert time.time() - start < TTL * 3, 'b took over after the lease expired'
        time.sleep(0.5)
    assert time.time() - start > TTL / 2, 'b took over before a lease of TTL could expire'
    deadline = time.time() + 10
    while True:  # a's view comes from its watch cache, which follows shortly
        cluster = a.get_cluster()
        if cluster.leader and cluster.leader.name == 'b':
            break
        assert time.time() < deadline, 'a sees b lead'
        time.sleep(0.2)
    b.get_cluster()
    assert b.delete_leader(), 'b resigns'
    assert a.attempt_to_acquire_leader(), 'a takes the free key at once'
    print('ok')


if __name__ == '__main__':
    main(sys.argv[1].split(','))
