/// The reviewer's answer.
#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    pub approved: bool,
}
