use super::*;

#[test]
fn every_code_is_written_as_its_name() {
    for c in Code::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str(), "{c:?}");
        assert_eq!(c.to_string(), c.as_str());
    }
}
