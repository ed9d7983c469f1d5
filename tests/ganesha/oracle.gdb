# gdb's own reading of what leakref's nfs-ganesha profile reports: the
# confirmed-client table (in-order through ganesha's rbt nodes, iteratively,
# as gdb's CLI has no local variables for recursion), each client's open
# owners and each owner's states, with their refcounts. Also ganesha's own
# per-partition entry counts. Run with the types file added:
#   gdb -batch -nx EXE CORE -ex 'add-symbol-file TYPES' -x oracle.gdb
set pagination off
set $ht = *(hash_table_t **)&ht_confirmed_client_id
set $perclient = (long)&((state_owner_t *)0)->so_owner.so_nfs4_owner.so_perclient
set $ownerlist = (long)&((struct state_t *)0)->state_owner_list
set $i = 0
set $recorded = 0
while $i < $ht->parameter.index_size
  set $recorded = $recorded + $ht->partitions[$i].count
  set $node = $ht->partitions[$i].rbt.root
  if $node
    while $node->left
      set $node = $node->left
    end
  end
  while $node
    set $c = (nfs_client_id_t *)((struct hash_data *)$node->rbt_opaq)->val.addr
    set $nown = 0
    set $o = $c->cid_openowners.next
    while $o != &$c->cid_openowners
      set $nown = $nown + 1
      set $o = $o->next
    end
    printf "clients 0x%lx %d %d\n", $c, $c->cid_refcount, $nown
    set $o = $c->cid_openowners.next
    while $o != &$c->cid_openowners
      set $ow = (state_owner_t *)((char *)$o - $perclient)
      set $nst = 0
      set $s = $ow->so_owner.so_nfs4_owner.so_state_list.next
      while $s != &$ow->so_owner.so_nfs4_owner.so_state_list
        set $nst = $nst + 1
        set $s = $s->next
      end
      printf "openowners 0x%lx %d %d\n", $ow, $ow->so_refcount, $nst
      set $s = $ow->so_owner.so_nfs4_owner.so_state_list.next
      while $s != &$ow->so_owner.so_nfs4_owner.so_state_list
        set $st = (struct state_t *)((char *)$s - $ownerlist)
        printf "states 0x%lx %d %d\n", $st, $st->state_refcount, $st->state_type
        set $s = $s->next
      end
      set $o = $o->next
    end
    # in-order successor: down the right child's left spine, or up until we
    # come from a left child
    if $node->next
      set $node = $node->next
      while $node->left
        set $node = $node->left
      end
    else
      set $from = $node
      set $node = $node->parent
      while $node && $node->next == $from
        set $from = $node
        set $node = $node->parent
      end
    end
  end
  set $i = $i + 1
end
printf "recorded %d\n", $recorded
