use super::*;
use crate::store::git::PAYLOAD_FILE;

#[test]
fn every_code_is_written_as_its_name() {
    for c in Code::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str(), "{c:?}");
        assert_eq!(c.to_string(), c.as_str());
    }
}

#[test]
fn the_tree_prefix_names_the_payload_file() {
    assert_eq!(TREE_PREFIX, format!("100644 {PAYLOAD_FILE}\0").as_bytes());
}
