//! A real Redis Cluster with replicas: a master dies, its replica takes over with the data.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisCluster;
use std::time::{Duration, Instant};

#[test]
fn a_cluster_with_replicas_fails_over_when_a_master_dies() {
    let mut cluster = RedisCluster::start_with_replicas(3, 1);
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "three masters: {masters:?}");
    assert_eq!(cluster.live().len(), 6, "three masters and three replicas");

    // Binary, as the store's keys are.
    let key: &[u8] = b"tollgate:failover:\xff\x00smoke";
    let mut connection = redis::cluster::ClusterClient::new(cluster.urls())
        .and_then(|client| client.get_connection())
        .expect("connects to the cluster");
    let () = redis::cmd("SET")
        .arg(key)
        .arg("survives")
        .query(&mut connection)
        .expect("SET through the cluster");
    // WAIT goes to every master (the one that took the write on the connection that wrote
    // it); the reply is the fewest replicas that acknowledged.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let acknowledged: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(1_000)
            .query(&mut connection)
            .expect("WAIT through the cluster");
        if acknowledged >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no replica acknowledged the write within 10 s"
        );
    }

    let owner = cluster.owner_of_key(key);
    assert!(masters.contains(&owner), "node {owner} is a master");
    let replica = cluster.replica_of(owner);
    let keys = cluster.keys_per_master();
    assert_eq!(
        keys.iter().map(|(_, count)| count).sum::<u64>(),
        1,
        "one key in the cluster: {keys:?}"
    );
    assert!(
        keys.contains(&(owner, 1)),
        "node {owner} holds it: {keys:?}"
    );

    let slot = cluster.key_slot_bytes(key);
    cluster.kill_node(owner);
    let promoted = cluster.wait_for_failover(owner);
    assert_eq!(promoted, replica, "the dead master's replica took over");
    assert!(
        cluster.masters().contains(&promoted),
        "node {promoted} reports itself master"
    );
    for asked in cluster.live() {
        assert_eq!(
            cluster.owner_seen_by(asked, slot),
            Some(promoted),
            "node {asked} sees the promoted node own slot {slot}"
        );
    }
    assert_eq!(cluster.owner(slot), promoted);

    let value: Option<String> = redis::cmd("GET")
        .arg(key)
        .query(&mut cluster.nodes[promoted].connection())
        .expect("GET on the promoted node");
    assert_eq!(
        value.as_deref(),
        Some("survives"),
        "the replica had the key"
    );
    let keys = cluster.keys_per_master();
    assert_eq!(keys.len(), 3, "three live masters again: {keys:?}");
    assert!(
        keys.contains(&(promoted, 1)),
        "the promoted node holds the key: {keys:?}"
    );

    // A new cluster client, given only the live nodes, finds the key on its new owner.
    let value: Option<String> = redis::cluster::ClusterClient::new(cluster.live_urls())
        .and_then(|client| client.get_connection())
        .and_then(|mut connection| redis::cmd("GET").arg(key).query(&mut connection))
        .expect("GET through the cluster after the failover");
    assert_eq!(value.as_deref(), Some("survives"));
}
