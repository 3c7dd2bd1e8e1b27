package vfs

// Check reports whether the state r names exists: a checkpoint it names
// that the vault does not hold is CheckpointNotFound, as GetCheckpoint
// says. Callers check both states of a diff before comparing them, so a
// misspelt name fails before any work and names the missing checkpoint.
func (r StateRef) Check() error {
	if r.Checkpoint == "" {
		return nil
	}
	_, err := r.Vault.GetCheckpoint(r.Checkpoint)
	return err
}
